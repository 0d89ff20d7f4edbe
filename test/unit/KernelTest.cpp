//===- KernelTest.cpp - CPU kernels against hand-computed results ---------===//
#include "runtime/kernels/Kernel.h"

#include <gtest/gtest.h>

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

TEST(Kernels, PadReflect) {
  AttrMap a;
  a.set("pads", AttrValue::ofInts({2, 1}));
  a.set("mode", AttrValue::ofString("reflect"));
  a.set("value", AttrValue::ofFloats({0}));
  auto y = runF32("pad", a, {{{3}, {1, 2, 3}}}, {6});
  EXPECT_EQ(y, (std::vector<float>{3, 2, 1, 2, 3, 2}));
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
