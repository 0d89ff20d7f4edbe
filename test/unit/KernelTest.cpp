//===- KernelTest.cpp - CPU kernels against hand-computed results ---------===//
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/Philox.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace partc::runtime;

namespace {

std::vector<float> runF32(const std::string &name, const AttrMap &attrs,
                          std::vector<std::pair<Shape, std::vector<float>>> ins,
                          const Shape &outShape) {
  std::vector<TensorType> inTypes;
  std::vector<TensorRef> refs;
  for (auto &[shape, data] : ins) {
    inTypes.push_back({DType::F32, shape});
    refs.push_back({data.data(), inTypes.back()});
  }
  std::vector<TensorType> outTypes = {{DType::F32, outShape}};
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel(name, attrs, inTypes, outTypes, k);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok())
    return {};
  std::vector<float> out(numElements(outShape));
  EXPECT_TRUE(k->run(refs, {{out.data(), outTypes[0]}}).ok());
  return out;
}

TEST(Kernels, ConvWithPaddingAndStride) {
  AttrMap a;
  a.set("strides", AttrValue::ofInts({2, 2}));
  a.set("pads", AttrValue::ofInts({1, 1, 1, 1}));
  a.set("dilations", AttrValue::ofInts({1, 1}));
  a.set("kernel_shape", AttrValue::ofInts({3, 3}));
  a.set("group", AttrValue::ofInts({1}));
  std::vector<float> x(9);
  for (int i = 0; i < 9; ++i)
    x[i] = i + 1; // 3x3 image 1..9
  std::vector<float> w(9, 1.0f);
  auto y =
      runF32("conv", a, {{{1, 1, 3, 3}, x}, {{1, 1, 3, 3}, w}}, {1, 1, 2, 2});
  // Windows centred at (0,0), (0,2), (2,0), (2,2) of the padded image.
  EXPECT_EQ(y, (std::vector<float>{12, 16, 24, 28}));
}

// A window whose attributes do not give the result's extent is refused
// before any offset is computed from them: a plan's dilation mutated to
// 2^61 (a fuzz finding of session 33) overflowed im2col's offsets.
TEST(Kernels, ConvRefusesWindowsThatDoNotGiveTheResult) {
  AttrMap a;
  a.set("strides", AttrValue::ofInts({1, 1}));
  a.set("pads", AttrValue::ofInts({1, 1, 1, 1}));
  a.set("dilations", AttrValue::ofInts({1, int64_t(1) << 40}));
  a.set("kernel_shape", AttrValue::ofInts({3, 3}));
  a.set("group", AttrValue::ofInts({1}));
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel(
      "conv", a, {{DType::F32, {1, 1, 6, 6}}, {DType::F32, {1, 1, 3, 3}}},
      {{DType::F32, {1, 1, 6, 6}}}, k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("window attributes give spatial extent 0 from "
                             "input [1,1,6,6], but the result is [1,1,6,6]"),
            std::string::npos)
      << s.message();
  // Beyond 2^60 positions would overflow in the kernels' 64 bits.
  a.set("dilations", AttrValue::ofInts({1, int64_t(1) << 61}));
  s = createCpuKernel("conv", a,
                      {{DType::F32, {1, 1, 6, 6}}, {DType::F32, {1, 1, 3, 3}}},
                      {{DType::F32, {1, 1, 6, 6}}}, k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("out of range in spatial dimension 1: padded "
                             "extent 8, dilated kernel 4611686018427387905"),
            std::string::npos)
      << s.message();
  a.set("dilations", AttrValue::ofInts({1, 1}));
  EXPECT_TRUE(
      createCpuKernel("conv", a,
                      {{DType::F32, {1, 1, 6, 6}}, {DType::F32, {1, 1, 3, 3}}},
                      {{DType::F32, {1, 1, 6, 6}}}, k)
          .ok());
}

// A window of 2^40 taps over an input of three, nearly all padding (a
// fuzz finding of session 34: such a pool ran for minutes). Only the taps
// in the input are visited; count_include_pad counts the padded ones.
TEST(Kernels, PoolingVisitsOnlyTheTapsInTheInput) {
  const int64_t taps = int64_t(1) << 40;
  AttrMap a;
  a.set("kernel_shape", AttrValue::ofInts({taps}));
  a.set("strides", AttrValue::ofInts({taps}));
  a.set("pads", AttrValue::ofInts({taps - 1, taps - 1}));
  a.set("dilations", AttrValue::ofInts({1}));
  a.set("ceil_mode", AttrValue::ofInts({0}));
  a.set("count_include_pad", AttrValue::ofInts({0}));
  std::vector<float> x = {1, 2, 3};
  // Window 0 holds position 0 and taps - 1 padded taps; window 1 holds
  // positions 1 and 2 and taps - 2 padded taps.
  EXPECT_EQ(runF32("max_pool", a, {{{1, 1, 3}, x}}, {1, 1, 2}),
            (std::vector<float>{1, 3}));
  EXPECT_EQ(runF32("avg_pool", a, {{{1, 1, 3}, x}}, {1, 1, 2}),
            (std::vector<float>{1, 2.5f}));
  a.set("count_include_pad", AttrValue::ofInts({1}));
  std::vector<float> y = runF32("avg_pool", a, {{{1, 1, 3}, x}}, {1, 1, 2});
  ASSERT_EQ(y.size(), 2u);
  EXPECT_FLOAT_EQ(y[0], 1.0f / float(taps));
  EXPECT_FLOAT_EQ(y[1], 5.0f / float(taps));
  std::vector<float> dx =
      runF32("avg_pool_grad", a, {{{1, 1, 2}, {1, 1}}}, {1, 1, 3});
  ASSERT_EQ(dx.size(), 3u);
  EXPECT_FLOAT_EQ(dx[2], 1.0f / float(taps));
  a.set("count_include_pad", AttrValue::ofInts({0}));
  EXPECT_EQ(runF32("avg_pool_grad", a, {{{1, 1, 2}, {4, 2}}}, {1, 1, 3}),
            (std::vector<float>{4, 1, 1}));
  EXPECT_EQ(runF32("max_pool_grad", a, {{{1, 1, 2}, {4, 2}}, {{1, 1, 3}, x}},
                   {1, 1, 3}),
            (std::vector<float>{4, 0, 2}));
}

TEST(Kernels, GroupedConvKeepsGroupsApart) {
  AttrMap a;
  a.set("group", AttrValue::ofInts({2}));
  a.set("strides", AttrValue::ofInts({1, 1}));
  a.set("pads", AttrValue::ofInts({0, 0, 0, 0}));
  a.set("dilations", AttrValue::ofInts({1, 1}));
  std::vector<float> x = {1, 2, 3, 4, 10, 20, 30, 40}; // 2 channels 2x2
  std::vector<float> w = {1, 1, 1, 1, 2, 2, 2, 2};     // 2 filters 1x2x2
  auto y =
      runF32("conv", a, {{{1, 2, 2, 2}, x}, {{2, 1, 2, 2}, w}}, {1, 2, 1, 1});
  EXPECT_EQ(y, (std::vector<float>{10, 200}));
}

TEST(Kernels, MatMulBroadcastsBatch) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6, 7, 8}; // 2x(2x2)
  std::vector<float> b = {1, 0, 0, 1};             // 2x2 identity
  auto y = runF32("matmul", {}, {{{2, 2, 2}, a}, {{2, 2}, b}}, {2, 2, 2});
  EXPECT_EQ(y, a);
}

TEST(Kernels, MatMulAddsBiasPerColumnThenRelu) {
  AttrMap attrs;
  attrs.set("activation", AttrValue::ofString("relu"));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}; // 3x2, a batch of rows
  std::vector<float> b = {1, 0, 0, 1};       // 2x2 identity
  std::vector<float> bias = {-2, 10};
  auto y = runF32("matmul", attrs, {{{3, 2}, a}, {{2, 2}, b}, {{1, 2}, bias}},
                  {3, 2});
  EXPECT_EQ(y, (std::vector<float>{0, 12, 1, 14, 3, 16}));
}

TEST(Kernels, MatMulAddsBiasThenResidualThenRelu) {
  AttrMap attrs;
  attrs.set("activation", AttrValue::ofString("relu"));
  std::vector<float> a = {1, 2, 3, 4, 5, 6}; // 3x2
  std::vector<float> b = {1, 0, 0, 1};       // 2x2 identity
  std::vector<float> bias = {-2, 10};
  std::vector<float> residual = {1, -20, -3, 0, 0.5f, -17};
  auto y = runF32("matmul", attrs,
                  {{{3, 2}, a}, {{2, 2}, b}, {{2}, bias}, {{3, 2}, residual}},
                  {3, 2});
  EXPECT_EQ(y, (std::vector<float>{0, 0, 0, 14, 3.5f, 0}));
}

// Gelu's tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))),
// after the bias, for a matmul and a Gemm; worked out by hand for x = 1
// (0.841192) and x = -2 (-0.045402), 0 for x = 0.
TEST(Kernels, ProductsApplyTanhGeluAfterTheBias) {
  AttrMap attrs;
  attrs.set("activation", AttrValue::ofString("gelu_tanh"));
  std::vector<float> a = {1, 2, -3, 0}; // 2x2
  std::vector<float> b = {1, 0, 0, 1};  // identity
  std::vector<float> bias = {0, -2};
  std::vector<float> expected = {0.841192f, 0.f, -0.0036373f, -0.045402f};
  auto y =
      runF32("matmul", attrs, {{{2, 2}, a}, {{2, 2}, b}, {{2}, bias}}, {2, 2});
  attrs.set("trans_a", AttrValue::ofInts({0}));
  attrs.set("trans_b", AttrValue::ofInts({0}));
  attrs.set("alpha", AttrValue::ofFloats({1.0}));
  attrs.set("beta", AttrValue::ofFloats({1.0}));
  auto g =
      runF32("gemm", attrs, {{{2, 2}, a}, {{2, 2}, b}, {{2}, bias}}, {2, 2});
  ASSERT_EQ(y.size(), 4u);
  ASSERT_EQ(g.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], expected[i], 2e-6f) << "matmul element " << i;
    EXPECT_NEAR(g[i], expected[i], 2e-6f) << "gemm element " << i;
  }
}

TEST(Kernels, ProductsRefuseOtherActivations) {
  AttrMap attrs;
  attrs.set("activation", AttrValue::ofString("gelu"));
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("matmul", attrs,
                             {{DType::F32, {2, 2}}, {DType::F32, {2, 2}}},
                             {{DType::F32, {2, 2}}}, k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unsupported fused activation 'gelu'"),
            std::string::npos)
      << s.message();
}

TEST(Kernels, MatMulRejectsAResidualOfAnotherShape) {
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("matmul", {},
                             {{DType::F32, {3, 2}},
                              {DType::F32, {2, 2}},
                              {DType::F32, {2}},
                              {DType::F32, {1, 2}}},
                             {{DType::F32, {3, 2}}}, k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("addend f32[1,2] must have the result's type"),
            std::string::npos)
      << s.message();
}

TEST(Kernels, FusedChainEqualsItsStepsWithBroadcasting) {
  // relu((x - b) * 2) / x with b per column and a scalar 2.
  AttrMap attrs;
  attrs.set("steps", AttrValue::ofString("sub,mul,relu,div"));
  attrs.set("args", AttrValue::ofInts({0, 1, -1, 2, -2, -3, 0}));
  std::vector<float> x = {1, 2, 3, 4, 5, 6};
  auto y = runF32("fused_elementwise", attrs,
                  {{{2, 3}, x}, {{3}, {1, 1, 10}}, {{}, {2}}}, {2, 3});
  EXPECT_EQ(y, (std::vector<float>{0, 1, 0, 1.5f, 1.6f, 0}));
}

TEST(Kernels, FusedChainReadsConcatenatedParts) {
  // The parts [2,1] and [2,2] are input 0, [2,3]; a per-column input after.
  AttrMap attrs;
  attrs.set("steps", AttrValue::ofString("add"));
  attrs.set("args", AttrValue::ofInts({0, 1}));
  attrs.set("concat_parts", AttrValue::ofInts({2}));
  auto y = runF32(
      "fused_elementwise", attrs,
      {{{2, 1}, {1, 2}}, {{2, 2}, {3, 4, 5, 6}}, {{3}, {10, 20, 30}}}, {2, 3});
  EXPECT_EQ(y, (std::vector<float>{11, 23, 34, 12, 25, 36}));
}

TEST(Kernels, FusedChainRefusesPartsThatDoNotConcatenate) {
  auto create = [](int64_t parts, std::vector<TensorType> ins,
                   const Shape &out) {
    AttrMap attrs;
    attrs.set("steps", AttrValue::ofString("relu"));
    attrs.set("args", AttrValue::ofInts({0}));
    attrs.set("concat_parts", AttrValue::ofInts({parts}));
    std::unique_ptr<Kernel> k;
    return createCpuKernel("fused_elementwise", attrs, ins, {{DType::F32, out}},
                           k);
  };
  EXPECT_TRUE(
      create(2, {{DType::F32, {2, 1}}, {DType::F32, {2, 2}}}, {2, 3}).ok());
  Status rows = create(2, {{DType::F32, {2, 1}}, {DType::F32, {3, 2}}}, {2, 3});
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.message().find("differs from f32[2,1] outside the last axis"),
            std::string::npos)
      << rows.message();
  EXPECT_FALSE(create(3, {{DType::F32, {2, 1}}, {DType::F32, {2, 2}}}, {2, 3})
                   .ok()); // more parts than operands
  EXPECT_FALSE(
      create(2, {{DType::F32, {2, 1}}, {DType::F32, {2, 2}}}, {2, 4}).ok());
}

TEST(Kernels, FusedChainRefusesBadPrograms) {
  auto create = [](const std::string &steps, std::vector<int64_t> args) {
    AttrMap attrs;
    attrs.set("steps", AttrValue::ofString(steps));
    attrs.set("args", AttrValue::ofInts(std::move(args)));
    std::vector<TensorType> types = {{DType::F32, {4}}};
    std::unique_ptr<Kernel> k;
    return createCpuKernel("fused_elementwise", attrs, types, types, k);
  };
  EXPECT_TRUE(create("neg,exp", {0, -1}).ok());
  EXPECT_FALSE(create("neg,exp", {0, -2}).ok()); // reads itself
  EXPECT_FALSE(create("neg,exp", {0, 1}).ok());  // no input 1
  EXPECT_FALSE(create("neg,exp", {0, 0}).ok());  // step 0 unread
  EXPECT_FALSE(create("add", {0}).ok());         // operand missing
  EXPECT_FALSE(create("neg", {0, 0}).ok());      // operand too many
  EXPECT_FALSE(create("softmax", {0}).ok());
}

TEST(Kernels, SliceWithNegativeStep) {
  AttrMap a;
  a.set("starts", AttrValue::ofInts({3}));
  a.set("steps", AttrValue::ofInts({-2}));
  auto y = runF32("slice", a, {{{4}, {1, 2, 3, 4}}}, {2});
  EXPECT_EQ(y, (std::vector<float>{4, 2}));
}

// Known answers of Philox4x32-10 from Random123's kat_vectors (Salmon et
// al.'s reference implementation).
TEST(Philox, MatchesKnownAnswers) {
  using partc::runtime::philox::philox4x32;
  auto zeros = philox4x32(0, 0, 0, 0, 0, 0);
  EXPECT_EQ(zeros.w[0], 0x6627e8d5u);
  EXPECT_EQ(zeros.w[1], 0xe169c58du);
  EXPECT_EQ(zeros.w[2], 0xbc57ac4cu);
  EXPECT_EQ(zeros.w[3], 0x9b00dbd8u);
  auto ones = philox4x32(~0u, ~0u, ~0u, ~0u, ~0u, ~0u);
  EXPECT_EQ(ones.w[0], 0x408f276du);
  EXPECT_EQ(ones.w[3], 0x6d5451fdu);
  auto pi = philox4x32(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u,
                       0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(pi.w[0], 0xd16cfe09u);
  EXPECT_EQ(pi.w[1], 0x94fdccebu);
  EXPECT_EQ(pi.w[2], 0x5001e420u);
  EXPECT_EQ(pi.w[3], 0x24126ea1u);
}

/// Dropout of ones: the kept elements are 1 / (1 - ratio), the others 0.
std::vector<float> dropoutOfOnes(int64_t n, double ratio, int64_t stream,
                                 int64_t step, int64_t seed,
                                 int64_t offset = 0) {
  AttrMap a;
  a.set("ratio", AttrValue::ofFloats({ratio}));
  a.set("stream", AttrValue::ofInts({stream}));
  a.set("offset", AttrValue::ofInts({offset}));
  TensorType x{DType::F32, {n}}, scalar{DType::I64, {}};
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("dropout", a, {x, scalar, scalar}, {x}, k);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!s.ok())
    return {};
  std::vector<float> ones(n, 1.0f), out(n);
  EXPECT_TRUE(k->run({{ones.data(), x}, {&step, scalar}, {&seed, scalar}},
                     {{out.data(), x}})
                  .ok());
  return out;
}

TEST(Kernels, DropoutKeepsOneMinusRatioScaled) {
  const int64_t n = 100003; // not a multiple of 4
  std::vector<float> y = dropoutOfOnes(n, 0.3, 0, 0, 42);
  ASSERT_EQ(y.size(), size_t(n));
  int64_t kept = 0;
  for (float v : y) {
    ASSERT_TRUE(v == 0.0f || v == static_cast<float>(1.0 / 0.7)) << v;
    kept += v != 0;
  }
  // 0.7 n kept, within 5 standard deviations (sqrt(n 0.21) = 145).
  EXPECT_NEAR(double(kept), 0.7 * n, 5 * 145.0);
  // The same numbers draw the same mask; another step, stream or seed a
  // different one.
  EXPECT_EQ(dropoutOfOnes(n, 0.3, 0, 0, 42), y);
  EXPECT_NE(dropoutOfOnes(n, 0.3, 0, 1, 42), y);
  EXPECT_NE(dropoutOfOnes(n, 0.3, 1, 0, 42), y);
  EXPECT_NE(dropoutOfOnes(n, 0.3, 0, 0, 43), y);
}

TEST(Kernels, DropoutSlicesDrawTheWholeBatchsMask) {
  // Slices of any length, at any offset (not only multiples of four), put
  // together give the mask of the whole: a data-parallel replica's rows.
  const int64_t n = 1001;
  std::vector<float> whole = dropoutOfOnes(n, 0.5, 3, 7, 11);
  for (int64_t cut : {1, 2, 3, 4, 5, 498, 1000}) {
    std::vector<float> joined = dropoutOfOnes(cut, 0.5, 3, 7, 11, 0);
    std::vector<float> rest = dropoutOfOnes(n - cut, 0.5, 3, 7, 11, cut);
    joined.insert(joined.end(), rest.begin(), rest.end());
    EXPECT_EQ(joined, whole) << "cut at " << cut;
  }
}

// A dropout folded into softmax_grad (partc-fuse-dropout) gives what the
// dropout then softmax_grad give, bit for bit, at offsets inside a group
// of four and along a middle axis.
TEST(Kernels, SoftmaxGradWithFoldedDropoutEqualsTheTwoOps) {
  for (int64_t offset : {0, 6}) {
    for (int64_t axis : {1, 2}) {
      Shape shape{3, 5, 8};
      TensorType x{DType::F32, shape}, scalar{DType::I64, {}};
      int64_t n = x.numElements(), step = 9, seed = 1234;
      std::vector<float> dz(n), p(n);
      for (int64_t i = 0; i < n; ++i) {
        dz[i] = static_cast<float>(i % 11) * 0.3f - 1.4f;
        p[i] = static_cast<float>(i % 7 + 1) * 0.05f;
      }
      AttrMap drop;
      drop.set("ratio", AttrValue::ofFloats({0.25}));
      drop.set("stream", AttrValue::ofInts({3}));
      drop.set("offset", AttrValue::ofInts({offset}));
      std::unique_ptr<Kernel> dropout, unfused, fused;
      ASSERT_TRUE(
          createCpuKernel("dropout", drop, {x, scalar, scalar}, {x}, dropout)
              .ok());
      AttrMap plain;
      plain.set("axis", AttrValue::ofInts({axis}));
      ASSERT_TRUE(
          createCpuKernel("softmax_grad", plain, {x, x}, {x}, unfused).ok());
      AttrMap folded = plain;
      folded.set("dropout_ratio", AttrValue::ofFloats({0.25}));
      folded.set("dropout_stream", AttrValue::ofInts({3}));
      folded.set("dropout_offset", AttrValue::ofInts({offset}));
      Status s = createCpuKernel("softmax_grad", folded, {x, x, scalar, scalar},
                                 {x}, fused);
      ASSERT_TRUE(s.ok()) << s.message();
      std::vector<float> dropped(n), expected(n), got(n);
      ASSERT_TRUE(dropout
                      ->run({{dz.data(), x}, {&step, scalar}, {&seed, scalar}},
                            {{dropped.data(), x}})
                      .ok());
      ASSERT_TRUE(unfused
                      ->run({{dropped.data(), x}, {p.data(), x}},
                            {{expected.data(), x}})
                      .ok());
      ASSERT_TRUE(fused
                      ->run({{dz.data(), x},
                             {p.data(), x},
                             {&step, scalar},
                             {&seed, scalar}},
                            {{got.data(), x}})
                      .ok());
      EXPECT_EQ(got, expected) << "offset " << offset << ", axis " << axis;
    }
  }
}

TEST(Kernels, DropoutRefusesRatioOfOne) {
  AttrMap a;
  a.set("ratio", AttrValue::ofFloats({1.0}));
  a.set("stream", AttrValue::ofInts({0}));
  TensorType x{DType::F32, {4}}, scalar{DType::I64, {}};
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("dropout", a, {x, scalar, scalar}, {x}, k);
  EXPECT_NE(s.message().find("must be in [0, 1)"), std::string::npos)
      << s.message();
}

TEST(Kernels, PadReflect) {
  AttrMap a;
  a.set("pads", AttrValue::ofInts({2, 1}));
  a.set("mode", AttrValue::ofString("reflect"));
  a.set("value", AttrValue::ofFloats({0}));
  auto y = runF32("pad", a, {{{3}, {1, 2, 3}}}, {6});
  EXPECT_EQ(y, (std::vector<float>{3, 2, 1, 2, 3, 2}));
}

AttrMap attentionAttrs(bool nanToZero) {
  // One head: q [2 queries, 1], k^T [1, 2 keys], v [2 keys, 1].
  AttrMap a;
  for (const char *name : {"q", "k", "v"}) {
    std::string n = name;
    bool keys = n == "k";
    a.set(n + "_shape", AttrValue::ofInts({1, keys ? 1 : 2, keys ? 2 : 1}));
    a.set(n + "_strides", AttrValue::ofInts({2, 1, 1}));
    a.set(n + "_offset", AttrValue::ofInts({0}));
  }
  a.set("perm", AttrValue::ofInts({0, 1, 2}));
  a.set("scale", AttrValue::ofFloats({2.0}));
  a.set("nan_to_zero", AttrValue::ofInts({nanToZero}));
  return a;
}

TEST(Kernels, AttentionWeighsValuesBySoftmaxOfScaledScores) {
  // Query 0 scores the keys 2 * [0, 1]; query 1, masked off key 0, sees
  // only key 1; with every key masked, nan_to_zero gives 0.
  std::vector<float> q = {1, 0}, k = {0, 1}, v = {1, 3};
  std::vector<float> mask = {0, 0, -INFINITY, 0};
  auto y =
      runF32("attention", attentionAttrs(false),
             {{{1, 2, 1}, q}, {{1, 1, 2}, k}, {{1, 2, 1}, v}, {{2, 2}, mask}},
             {1, 2, 1});
  float e2 = std::exp(2.f);
  EXPECT_NEAR(y[0], (1 + 3 * e2) / (1 + e2), 1e-5);
  EXPECT_NEAR(y[1], 3, 1e-6);
  std::vector<float> hidden = {0, 0, -INFINITY, -INFINITY};
  auto z =
      runF32("attention", attentionAttrs(true),
             {{{1, 2, 1}, q}, {{1, 1, 2}, k}, {{1, 2, 1}, v}, {{2, 2}, hidden}},
             {1, 2, 1});
  EXPECT_NEAR(z[0], (1 + 3 * e2) / (1 + e2), 1e-5);
  EXPECT_EQ(z[1], 0.f);
}

// `causal` hides the keys past each query whatever the bias says there
// (partc-fuse-attention drops the lower triangle from a decoder's mask and
// keeps the padding mask per key): with no bias, with a bias of zeros, and
// with a padding mask that hides key 0 from both queries.
TEST(Kernels, AttentionCausalHidesKeysPastTheQuery) {
  std::vector<float> q = {1, 0}, k = {0, 1}, v = {1, 3};
  AttrMap causal = attentionAttrs(true);
  causal.set("causal", AttrValue::ofInts({1}));
  auto y = runF32("attention", causal,
                  {{{1, 2, 1}, q}, {{1, 1, 2}, k}, {{1, 2, 1}, v}}, {1, 2, 1});
  EXPECT_EQ(y[0], 1.f); // query 0 sees key 0 only, not key 1's score of 2
  EXPECT_NEAR(y[1], 2.f, 1e-6);
  auto z = runF32(
      "attention", causal,
      {{{1, 2, 1}, q}, {{1, 1, 2}, k}, {{1, 2, 1}, v}, {{2}, {0.f, 0.f}}},
      {1, 2, 1});
  EXPECT_EQ(z, y);
  auto w = runF32(
      "attention", causal,
      {{{1, 2, 1}, q}, {{1, 1, 2}, k}, {{1, 2, 1}, v}, {{2}, {-INFINITY, 0.f}}},
      {1, 2, 1});
  EXPECT_EQ(w[0], 0.f); // every key hidden: nan_to_zero
  EXPECT_NEAR(w[1], 3.f, 1e-6);
}

TEST(Kernels, AttentionRefusesAMaskThatDoesNotBroadcast) {
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("attention", attentionAttrs(false),
                             {{DType::F32, {1, 2, 1}},
                              {DType::F32, {1, 1, 2}},
                              {DType::F32, {1, 2, 1}},
                              {DType::F32, {3, 2}}},
                             {{DType::F32, {1, 2, 1}}}, k);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bias f32[3,2] does not broadcast to the scores"),
            std::string::npos)
      << s.message();
}

TEST(Kernels, SoftmaxRowsSumToOne) {
  AttrMap a;
  a.set("axis", AttrValue::ofInts({1}));
  a.set("nan_to_zero", AttrValue::ofInts({0}));
  auto y = runF32("softmax", a, {{{2, 3}, {1, 2, 3, 0, 0, 1000}}}, {2, 3});
  EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, 1e-6);
  EXPECT_NEAR(y[5], 1.0, 1e-6); // no overflow on large inputs
}

TEST(Kernels, ReduceMeanOverAxes) {
  AttrMap a;
  a.set("axes", AttrValue::ofInts({1}));
  auto y = runF32("reduce_mean", a, {{{2, 2}, {1, 3, 5, 9}}}, {2, 1});
  EXPECT_EQ(y, (std::vector<float>{2, 7}));
}

TEST(Kernels, RejectsInconsistentTypes) {
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("add", {}, {{DType::F32, {2}}, {DType::F32, {3}}},
                             {{DType::F32, {3}}}, k);
  EXPECT_FALSE(s.ok());
  s = createCpuKernel("conv", {},
                      {{DType::F32, {1, 3, 4, 4}}, {DType::F32, {2, 2, 3, 3}}},
                      {{DType::F32, {1, 2, 2, 2}}}, k);
  EXPECT_NE(s.message().find("group"), std::string::npos) << s.message();
  s = createCpuKernel("nope", {}, {}, {}, k);
  EXPECT_FALSE(s.ok());
}

TEST(Kernels, GatherElementsReportsIndexOutOfRange) {
  TensorType data{DType::F32, {2, 3}}, indices{DType::I64, {2, 2}};
  TensorType out{DType::F32, {2, 2}};
  AttrMap attrs;
  attrs.set("axis", AttrValue::ofInts({1}));
  std::unique_ptr<Kernel> k;
  ASSERT_TRUE(
      createCpuKernel("gather_elements", attrs, {data, indices}, {out}, k)
          .ok());
  std::vector<float> x = {1, 2, 3, 4, 5, 6}, y(4);
  std::vector<int64_t> idx = {2, -3, 0, 1};
  ASSERT_TRUE(
      k->run({{x.data(), data}, {idx.data(), indices}}, {{y.data(), out}})
          .ok());
  EXPECT_EQ(y, (std::vector<float>{3, 1, 4, 5}));
  idx[3] = 3;
  Status s =
      k->run({{x.data(), data}, {idx.data(), indices}}, {{y.data(), out}});
  EXPECT_NE(s.message().find("index 3 is out of range [-3, 3)"),
            std::string::npos)
      << s.message();
}

// Rows padded past their classes (`classes`): the padding is never read
// (NaN there changes nothing), the loss is the unpadded rows', the
// gradient is theirs with zeros in the padding, and a label in the
// padding is outside the classes.
TEST(Kernels, CrossEntropyReadsOnlyTheClassesOfPaddedRows) {
  TensorType plain{DType::F32, {2, 3}}, padded{DType::F32, {2, 5}};
  TensorType labelsType{DType::I64, {2}}, scalar{DType::F32, {}};
  AttrMap none, classes;
  classes.set("classes", AttrValue::ofInts({3}));
  std::vector<float> x = {0.5f, -1.f, 2.f, 3.f, 0.f, 1.f};
  std::vector<float> xPadded = {0.5f, -1.f, 2.f, NAN, 40.f,
                                3.f,  0.f,  1.f, NAN, -7.f};
  std::vector<int64_t> labels = {2, 0};
  float dloss = 2.f;
  auto run = [&](const AttrMap &attrs, TensorType logits,
                 std::vector<float> &in, float &loss,
                 std::vector<float> &grad) {
    std::unique_ptr<Kernel> l, g;
    ASSERT_TRUE(createCpuKernel("softmax_cross_entropy", attrs,
                                {logits, labelsType}, {scalar}, l)
                    .ok());
    ASSERT_TRUE(createCpuKernel("softmax_cross_entropy_grad", attrs,
                                {logits, labelsType, scalar}, {logits}, g)
                    .ok());
    ASSERT_TRUE(l->run({{in.data(), logits}, {labels.data(), labelsType}},
                       {{&loss, scalar}})
                    .ok());
    grad.assign(logits.numElements(), 99.f);
    ASSERT_TRUE(g->run({{in.data(), logits},
                        {labels.data(), labelsType},
                        {&dloss, scalar}},
                       {{grad.data(), logits}})
                    .ok());
  };
  float loss = 0, lossPadded = 0;
  std::vector<float> grad, gradPadded;
  run(none, plain, x, loss, grad);
  run(classes, padded, xPadded, lossPadded, gradPadded);
  EXPECT_EQ(loss, lossPadded);
  EXPECT_EQ(gradPadded, (std::vector<float>{grad[0], grad[1], grad[2], 0, 0,
                                            grad[3], grad[4], grad[5], 0, 0}));
  labels[1] = 3;
  std::unique_ptr<Kernel> l;
  ASSERT_TRUE(createCpuKernel("softmax_cross_entropy", classes,
                              {padded, labelsType}, {scalar}, l)
                  .ok());
  Status s = l->run({{xPadded.data(), padded}, {labels.data(), labelsType}},
                    {{&lossPadded, scalar}});
  EXPECT_NE(s.message().find("outside the 3 classes"), std::string::npos)
      << s.message();
  classes.set("classes", AttrValue::ofInts({6}));
  EXPECT_FALSE(createCpuKernel("softmax_cross_entropy", classes,
                               {padded, labelsType}, {scalar}, l)
                   .ok());
}

TEST(Kernels, ResizeNeedsEveryAttribute) {
  TensorType in{DType::F32, {1, 1, 2, 2}}, out{DType::F32, {1, 1, 4, 4}};
  AttrMap attrs;
  attrs.set("scales", AttrValue::ofFloats({1, 1, 2, 2}));
  attrs.set("mode", AttrValue::ofString("linear"));
  attrs.set("coordinate_transformation_mode",
            AttrValue::ofString("half_pixel"));
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("resize", attrs, {in}, {out}, k);
  EXPECT_NE(s.message().find("'nearest_mode'"), std::string::npos)
      << s.message();
  attrs.set("nearest_mode", AttrValue::ofString("floor"));
  // Bilinear doubling of [[0, 1], [2, 3]] with half-pixel centres.
  std::vector<float> y =
      runF32("resize", attrs, {{{1, 1, 2, 2}, {0, 1, 2, 3}}}, {1, 1, 4, 4});
  std::vector<float> expected = {0,   0.25, 0.75, 1,   0.5, 0.75, 1.25, 1.5,
                                 1.5, 1.75, 2.25, 2.5, 2,   2.25, 2.75, 3};
  EXPECT_EQ(y, expected);
}

TEST(Kernels, RefuseAPlanWithoutTheirAttributes) {
  // Defaults live in the ops' definitions; a kernel never makes one up.
  TensorType x{DType::F32, {1, 1, 3, 3}}, y{DType::F32, {1, 1, 3, 3}};
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("transpose", {}, {x}, {y}, k);
  EXPECT_NE(s.message().find("needs the attribute 'perm'"), std::string::npos)
      << s.message();
  EXPECT_FALSE(k);
  AttrMap conv;
  conv.set("strides", AttrValue::ofInts({1, 1}));
  conv.set("pads", AttrValue::ofInts({1, 1, 1, 1}));
  conv.set("dilations", AttrValue::ofInts({1, 1}));
  conv.set("kernel_shape", AttrValue::ofInts({3, 3}));
  s = createCpuKernel("conv", conv, {x, {DType::F32, {1, 1, 3, 3}}}, {y}, k);
  EXPECT_NE(s.message().find("needs the attribute 'group'"), std::string::npos)
      << s.message();
}

} // namespace

TEST(Kernels, ArgMaxAndArgMinPickNanAndBreakTies) {
  // Rows: a tie (3 at 1 and 3), a NaN (which numpy returns for both).
  TensorType in{DType::F32, {2, 4}}, out{DType::I64, {2}};
  std::vector<float> x = {1, 3, 0, 3, 2, NAN, 5, -1};
  auto run = [&](const char *name, int64_t last) {
    AttrMap attrs;
    attrs.set("axis", AttrValue::ofInts({1}));
    attrs.set("keepdims", AttrValue::ofInts({0}));
    attrs.set("select_last_index", AttrValue::ofInts({last}));
    std::unique_ptr<Kernel> k;
    EXPECT_TRUE(createCpuKernel(name, attrs, {in}, {out}, k).ok());
    std::vector<int64_t> y(2, -7);
    EXPECT_TRUE(k->run({{x.data(), in}}, {{y.data(), out}}).ok());
    return y;
  };
  EXPECT_EQ(run("arg_max", 0), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(run("arg_max", 1), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(run("arg_min", 0), (std::vector<int64_t>{2, 1}));
}

TEST(Kernels, CumSumExclusiveReverseAndWrappingIntegers) {
  TensorType in{DType::I32, {2, 3}};
  std::vector<int32_t> x = {1, 2, 3, 2147483647, 1, 0};
  auto run = [&](int64_t axis, int64_t exclusive, int64_t reverse) {
    AttrMap attrs;
    attrs.set("axis", AttrValue::ofInts({axis}));
    attrs.set("exclusive", AttrValue::ofInts({exclusive}));
    attrs.set("reverse", AttrValue::ofInts({reverse}));
    std::unique_ptr<Kernel> k;
    EXPECT_TRUE(createCpuKernel("cum_sum", attrs, {in}, {in}, k).ok());
    std::vector<int32_t> y(6);
    EXPECT_TRUE(k->run({{x.data(), in}}, {{y.data(), in}}).ok());
    return y;
  };
  EXPECT_EQ(run(1, 0, 0), (std::vector<int32_t>{1, 3, 6, 2147483647,
                                                -2147483648, -2147483648}));
  EXPECT_EQ(run(1, 1, 1), (std::vector<int32_t>{5, 3, 0, 1, 0, 0}));
  EXPECT_EQ(run(0, 1, 0), (std::vector<int32_t>{0, 0, 0, 1, 2, 3}));
}

TEST(Kernels, TopKSortsStablyWithNanLargest) {
  TensorType in{DType::F32, {1, 5}};
  TensorType values{DType::F32, {1, 3}}, indices{DType::I64, {1, 3}};
  std::vector<float> x = {2, NAN, 7, 2, -1};
  auto run = [&](int64_t largest, std::vector<int64_t> &idx) {
    AttrMap attrs;
    attrs.set("axis", AttrValue::ofInts({1}));
    attrs.set("k", AttrValue::ofInts({3}));
    attrs.set("largest", AttrValue::ofInts({largest}));
    std::unique_ptr<Kernel> k;
    EXPECT_TRUE(
        createCpuKernel("top_k", attrs, {in}, {values, indices}, k).ok());
    std::vector<float> v(3);
    idx.assign(3, -7);
    EXPECT_TRUE(
        k->run({{x.data(), in}}, {{v.data(), values}, {idx.data(), indices}})
            .ok());
    return v;
  };
  std::vector<int64_t> idx;
  std::vector<float> v = run(1, idx);
  EXPECT_TRUE(std::isnan(v[0]));
  EXPECT_EQ(v[1], 7);
  EXPECT_EQ(v[2], 2);
  EXPECT_EQ(idx, (std::vector<int64_t>{1, 2, 0}));
  EXPECT_EQ(run(0, idx), (std::vector<float>{-1, 2, 2}));
  EXPECT_EQ(idx, (std::vector<int64_t>{4, 0, 3}));
  // k beyond the axis is refused when the kernel is made.
  AttrMap attrs;
  attrs.set("axis", AttrValue::ofInts({1}));
  attrs.set("k", AttrValue::ofInts({6}));
  attrs.set("largest", AttrValue::ofInts({1}));
  std::unique_ptr<Kernel> k;
  Status s = createCpuKernel("top_k", attrs, {in}, {values, indices}, k);
  EXPECT_NE(s.message().find("k = 6 must lie in [0, 5]"), std::string::npos)
      << s.message();
}
