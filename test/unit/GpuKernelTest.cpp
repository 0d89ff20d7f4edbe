//===- GpuKernelTest.cpp - GPU kernels against the CPU kernels ------------===//
//
// On a GPU, kernels must give the CPU kernels' numbers for every layout
// their launchers tell apart. Without one, the code generated for fused
// chains must still compile with NVRTC (for Hopper).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuExecutor.h"
#include "runtime/cuda/ChainCodegen.h"
#include "runtime/cuda/CudaExecutor.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/ExecutorImpl.h"
#include "runtime/cuda/TunedTwins.h"
#include "runtime/kernels/FusedElementwise.h"
#include "runtime/kernels/Kernel.h"
#include "runtime/kernels/StridedMatMul.h"

#include "TestPlans.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

using namespace partc::runtime;
using namespace partc::runtime::cuda;

namespace {

FusedParams paramsFor(const std::vector<ew::Step> &steps,
                      const std::vector<int> &lhs, const std::vector<int> &rhs,
                      const std::vector<FusedParams::Mode> &modes) {
  FusedParams p;
  p.steps = static_cast<int>(steps.size());
  p.inputs = static_cast<int>(modes.size());
  for (int s = 0; s < p.steps; ++s) {
    p.step[s] = static_cast<unsigned char>(steps[s]);
    p.lhs[s] = static_cast<signed char>(lhs[s]);
    p.rhs[s] = static_cast<signed char>(rhs[s]);
    p.param[s][0] = 0.75f;
    p.param[s][1] = std::numeric_limits<float>::infinity();
  }
  for (int k = 0; k < p.inputs; ++k)
    p.mode[k] = modes[k];
  return p;
}

/// Records the candidate it was told to adopt; runs nothing.
class AdoptingKernel : public GpuKernel {
public:
  Status run(DeviceContext &, const std::vector<TensorRef> &,
             const std::vector<TensorRef> &) override {
    return Status();
  }
  bool adoptCandidate(size_t c) override {
    adopted = static_cast<int>(c);
    return true;
  }
  int adopted = -1;
};

Instruction matmulOver(int64_t rows, int64_t transB) {
  Instruction in;
  in.kernel = "matmul";
  in.attrs.set("trans_b", AttrValue::ofInts({transB}));
  BufferRef a, b, y;
  a.type = {DType::BF16, {rows, 64}};
  b.type = {DType::BF16, {64, 64}};
  y.type = {DType::BF16, {rows, 64}};
  in.inputs = {a, b};
  in.outputs = {y};
  return in;
}

TEST(TunedTwins, IdenticalKernelsTakeTheLeastSummedCandidate) {
  // Instructions 0, 2 and 3 are twins; 1 differs in shape, 4 in an
  // attribute. Twin 0 alone would pick candidate 1, twin 2 candidate 2;
  // summed, candidate 0 is least. Candidate 3 is fastest in sum but failed
  // in twin 3, so it is never taken.
  DeviceProgram prog;
  prog.instructions = {matmulOver(8, 0), matmulOver(16, 0), matmulOver(8, 0),
                       matmulOver(8, 0), matmulOver(8, 1)};
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> times = {{1.0f, 0.9f, 1.3f, 0.1f},
                                           {1.0f, 0.5f, 1.0f, 1.0f},
                                           {1.0f, 1.2f, 0.8f, 0.1f},
                                           {1.0f, 1.1f, 1.0f, inf},
                                           {1.0f, 0.5f, 1.0f, 1.0f}};
  std::vector<TunedTwins> groups;
  for (size_t i = 0; i < prog.instructions.size(); ++i)
    addTunedTwin(groups, prog, i, times[i]);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].members, (std::vector<size_t>{0, 2, 3}));
  std::vector<std::unique_ptr<GpuKernel>> kernels;
  for (size_t i = 0; i < prog.instructions.size(); ++i)
    kernels.push_back(std::make_unique<AdoptingKernel>());
  chooseForTwins(groups, kernels);
  auto adopted = [&](size_t i) {
    return static_cast<AdoptingKernel &>(*kernels[i]).adopted;
  };
  EXPECT_EQ(adopted(0), 0);
  EXPECT_EQ(adopted(2), 0);
  EXPECT_EQ(adopted(3), 0);
  // A kernel without twins keeps its own choice.
  EXPECT_EQ(adopted(1), -1);
  EXPECT_EQ(adopted(4), -1);
}

TEST(TunedTwins, TwinsWithDifferentCandidateListsStayApart) {
  DeviceProgram prog;
  prog.instructions = {matmulOver(8, 0), matmulOver(8, 0)};
  std::vector<TunedTwins> groups;
  addTunedTwin(groups, prog, 0, {1.0f, 0.5f});
  addTunedTwin(groups, prog, 1, {1.0f, 0.5f, 0.2f});
  EXPECT_EQ(groups.size(), 2u);
}

TEST(ChainCodegen, EveryStepCompilesForHopperWithoutAGpu) {
  // Every unary step in one chain, then every binary step over inputs read
  // in each of the three ways.
  // Chains hold at most kMaxSteps, so the unary steps go in two halves;
  // parameters include an infinity (clip's default bounds).
  std::vector<ew::Step> unary[2], binary;
  std::vector<int> uLhs[2], bLhs, bRhs;
  for (int s = 0; s < ew::kNumUnary; ++s) {
    int half = s < ew::kNumUnary / 2 ? 0 : 1;
    int i = static_cast<int>(unary[half].size());
    unary[half].push_back(static_cast<ew::Step>(s));
    uLhs[half].push_back(i == 0 ? 0 : -i);
  }
  for (int s = ew::kNumUnary; s < ew::kNumSteps; ++s) {
    int i = static_cast<int>(binary.size());
    binary.push_back(static_cast<ew::Step>(s));
    bLhs.push_back(i == 0 ? 0 : -i);
    bRhs.push_back(1 + i % 2);
  }
  for (const FusedParams &p :
       {paramsFor(unary[0], uLhs[0], uLhs[0], {FusedParams::Same}),
        paramsFor(unary[1], uLhs[1], uLhs[1], {FusedParams::Same}),
        paramsFor(
            binary, bLhs, bRhs,
            {FusedParams::Broadcast, FusedParams::Scalar, FusedParams::Same}),
        // Input 0 read from concatenated parts (its own loops).
        paramsFor(
            binary, bLhs, bRhs,
            {FusedParams::Parts, FusedParams::Broadcast, FusedParams::Same})}) {
    std::string source = chainSource(p);
    std::vector<char> cubin;
    Status s = compileChainSource(source, "sm_90", cubin);
    ASSERT_TRUE(s.ok()) << s.message() << "\n" << source;
    EXPECT_GT(cubin.size(), 0u);
  }
}

TEST(ChainCodegen, CompileErrorsCarryNvrtcLog) {
  std::vector<char> cubin;
  Status s = compileChainSource("this is not CUDA", "sm_90", cubin);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("NVRTC could not compile"), std::string::npos)
      << s.message();
}

struct Layout {
  const char *name;
  std::vector<Shape> inputs;
  Shape output;
};

/// Runs kernel `name` on the CPU and on the GPU once per context that
/// `contexts` lists (by name), and expects the same numbers within `rtol`.
/// Inputs are uniform in [lo, hi).
void expectGpuMatchesCpu(
    const std::string &name, const AttrMap &attrs, const Layout &layout,
    const std::vector<std::pair<const char *, DeviceContext>> &contexts,
    float lo = 0.25f, float hi = 2.f, float rtol = 1e-5f) {
  SCOPED_TRACE(name + ", " + layout.name);
  std::vector<TensorType> inTypes;
  std::vector<std::vector<float>> host;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(lo, hi);
  for (const Shape &s : layout.inputs) {
    inTypes.push_back({DType::F32, s});
    host.emplace_back(numElements(s));
    for (float &v : host.back())
      v = uniform(rng);
  }
  TensorType outType{DType::F32, layout.output};
  int64_t n = numElements(layout.output);

  std::unique_ptr<Kernel> cpu;
  ASSERT_TRUE(createCpuKernel(name, attrs, inTypes, {outType}, cpu).ok());
  std::vector<TensorRef> cpuIn;
  for (size_t k = 0; k < host.size(); ++k)
    cpuIn.push_back({host[k].data(), inTypes[k]});
  std::vector<float> expected(n);
  ASSERT_TRUE(cpu->run(cpuIn, {{expected.data(), outType}}).ok());

  std::vector<TensorRef> gpuIn;
  for (size_t k = 0; k < host.size(); ++k) {
    void *d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, host[k].size() * sizeof(float)), cudaSuccess);
    cudaMemcpy(d, host[k].data(), host[k].size() * sizeof(float),
               cudaMemcpyHostToDevice);
    gpuIn.push_back({d, inTypes[k]});
  }
  void *y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, n * sizeof(float)), cudaSuccess);
  for (auto [variant, prototype] : contexts) {
    DeviceContext ctx = prototype;
    std::unique_ptr<GpuKernel> k;
    Status s = createGpuKernel(name, attrs, inTypes, {outType}, ctx, k);
    ASSERT_TRUE(s.ok() && k) << s.message();
    // The executor lends each device's kernels one shared workspace.
    void *workspace = nullptr;
    if (!ctx.workspace && k->workspaceBytes() > 0) {
      ASSERT_EQ(cudaMalloc(&workspace, k->workspaceBytes()), cudaSuccess);
      ctx.workspace = workspace;
      ctx.workspaceBytes = k->workspaceBytes();
    }
    cudaMemset(y, 0, n * sizeof(float));
    ASSERT_TRUE(k->run(ctx, gpuIn, {{y, outType}}).ok());
    cudaFree(workspace);
    std::vector<float> got(n);
    ASSERT_EQ(
        cudaMemcpy(got.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost),
        cudaSuccess);
    for (int64_t i = 0; i < n; ++i) {
      // Outside an op's domain (asin of 1.5) both sides must give NaN.
      if (std::isnan(expected[i])) {
        ASSERT_TRUE(std::isnan(got[i])) << variant << ", element " << i;
        continue;
      }
      ASSERT_NEAR(got[i], expected[i], rtol * std::fabs(expected[i]) + 1e-6f)
          << variant << ", element " << i;
    }
  }
  for (TensorRef &r : gpuIn)
    cudaFree(r.data);
  cudaFree(y);
}

/// fused_elementwise(steps, args, params), generated and interpreted.
void expectSameOnGpu(const std::string &steps, const std::vector<int64_t> &args,
                     const Layout &layout,
                     const std::vector<double> &params = {}) {
  AttrMap attrs;
  attrs.set("steps", AttrValue::ofString(steps));
  attrs.set("args", AttrValue::ofInts(args));
  if (!params.empty())
    attrs.set("params", AttrValue::ofFloats(params));
  DeviceContext generated, interpreted;
  interpreted.options.generatedChains = false;
  expectGpuMatchesCpu("fused_elementwise", attrs, layout,
                      {{"generated", generated}, {"interpreted", interpreted}});
  EXPECT_EQ(generatedChainStats().failed, 0)
      << generatedChainStats().firstFailure;
}

TEST(ChainCodegen, GeneratedKernelsMatchInterpreterAndCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU: only compilation is checked here";
  // x0 * x1 + tanh(x2) / x0: every layout the launcher distinguishes.
  std::string steps = "mul,tanh,div,add";
  std::vector<int64_t> args = {0, 1, 2, -2, 0, -1, -3};
  const Layout layouts[] = {
      {"same shape, 4 per thread", {{8, 64}, {8, 64}, {8, 64}}, {8, 64}},
      {"same shape, odd count", {{7, 9}, {7, 9}, {7, 9}}, {7, 9}},
      {"scalar operand", {{8, 64}, {}, {8, 64}}, {8, 64}},
      {"row broadcast, 4 per thread", {{8, 64}, {1, 64}, {8, 1}}, {8, 64}},
      {"column broadcast, odd rows", {{5, 6}, {5, 1}, {1, 6}}, {5, 6}},
      {"three dimensions", {{2, 3, 8}, {3, 1}, {2, 1, 8}}, {2, 3, 8}},
  };
  for (const Layout &l : layouts)
    expectSameOnGpu(steps, args, l);
  // Steps with parameters, one of them infinite (clip's default max).
  expectSameOnGpu(
      "selu,celu,leaky_relu,mul,clip", {0, -1, -2, -3, 1, -4},
      {"parameters", {{8, 64}, {1, 64}}, {8, 64}},
      {1.5, 1.1, 0.8, 0.02, -0.5, std::numeric_limits<double>::infinity()});
  // GPT-2's tanh Gelu as exported: 8 steps over 5 scalars.
  expectSameOnGpu("mul,pow,mul,add,mul,tanh,add,mul",
                  {0, 1, 0, 2, -2, 3, 0, -3, -4, 4, -5, -6, 5, -1, -7},
                  {"scalars", {{16, 32}, {}, {}, {}, {}, {}}, {16, 32}});
}

TEST(ChainCodegen, ConcatenatedPartsMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU: only compilation is checked here";
  // A DenseNet layer's batch norm and ReLU, channels last, on the parts of
  // its concatenation (partc-fuse-concat).
  auto check = [](int64_t parts, const Layout &layout) {
    AttrMap attrs;
    attrs.set("steps", AttrValue::ofString("mul,add,relu"));
    attrs.set("args", AttrValue::ofInts({0, 1, -1, 2, -2}));
    attrs.set("concat_parts", AttrValue::ofInts({parts}));
    DeviceContext generated, interpreted;
    interpreted.options.generatedChains = false;
    expectGpuMatchesCpu(
        "fused_elementwise", attrs, layout,
        {{"generated", generated}, {"interpreted", interpreted}}, -2.f, 2.f);
    EXPECT_EQ(generatedChainStats().failed, 0)
        << generatedChainStats().firstFailure;
  };
  check(3, {"DenseNet's widths, 4 a thread",
            {{2, 4, 4, 64}, {2, 4, 4, 32}, {2, 4, 4, 32}, {128}, {128}},
            {2, 4, 4, 128}});
  // Odd widths: one element a thread; the shift read at the result's
  // shape.
  check(3, {"odd widths",
            {{3, 5, 3}, {3, 5, 5}, {3, 5, 1}, {9}, {3, 5, 9}},
            {3, 5, 9}});
  // DenseNet-121's widest: 64 channels then 24 parts of 32 (the search
  // over 25 part starts).
  Layout wide{"25 parts", {{2, 3, 64}}, {2, 3, 64 + 24 * 32}};
  for (int q = 0; q < 24; ++q)
    wide.inputs.push_back({2, 3, 32});
  wide.inputs.push_back({64 + 24 * 32});
  wide.inputs.push_back({64 + 24 * 32});
  check(25, wide);
}

} // namespace

namespace {

TEST(GpuKernels, EveryUnaryStepMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  for (int s = 0; s < ew::kNumUnary; ++s) {
    const ew::StepInfo &info = ew::kSteps[s];
    std::string name = info.name;
    AttrMap attrs;
    if (static_cast<ew::Step>(s) == ew::Step::GeluTanh) {
      name = "gelu";
      attrs.set("approximate", AttrValue::ofString("tanh"));
    } else if (static_cast<ew::Step>(s) == ew::Step::Gelu) {
      attrs.set("approximate", AttrValue::ofString("none"));
    }
    const double values[2] = {0.7, 1.3};
    for (int i = 0; i < info.params; ++i)
      attrs.set(info.paramNames[i], AttrValue::ofFloats({values[i]}));
    bool positive = name == "log" || name == "sqrt" || name == "reciprocal";
    for (const Layout &l : {Layout{"16-byte units", {{8, 64}}, {8, 64}},
                            Layout{"odd count", {{7, 9}}, {7, 9}}})
      expectGpuMatchesCpu(name, attrs, l, {{name.c_str(), DeviceContext()}},
                          positive ? 0.25f : -2.f, 2.f, 1e-5f);
  }
}

TEST(GpuKernels, SoftmaxAddsItsBias) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  // Rows of 32 or more run a warp per row (held in registers up to 128,
  // and in 16-byte units up to 2048 where a multiple of 4), shorter ones a
  // thread per row, and a softmax along another axis indexes the bias per
  // element.
  const Layout last[] = {
      {"causal mask, warp per row",
       {{2, 3, 40, 40}, {1, 1, 40, 40}},
       {2, 3, 40, 40}},
      {"padding mask, warp per row",
       {{2, 3, 5, 64}, {2, 1, 1, 64}},
       {2, 3, 5, 64}},
      {"per-row bias, warp per row",
       {{2, 3, 5, 64}, {2, 1, 5, 1}},
       {2, 3, 5, 64}},
      {"rows of 100 in registers", {{3, 2, 100}, {3, 1, 100}}, {3, 2, 100}},
      {"rows of 300 in 16-byte units", {{3, 2, 300}, {3, 1, 300}}, {3, 2, 300}},
      {"rows of 1100 in 16-byte units", {{2, 1100}, {1, 1100}}, {2, 1100}},
      {"causal mask, rows of 512 in 16-byte units",
       {{2, 2, 8, 512}, {1, 1, 8, 512}},
       {2, 2, 8, 512}},
      {"per-row bias, rows of 256 in 16-byte units",
       {{2, 3, 4, 256}, {2, 1, 4, 1}},
       {2, 3, 4, 256}},
      {"rows of 2048 in 16-byte units", {{3, 2048}, {1, 2048}}, {3, 2048}},
      {"rows of 301 from cache", {{3, 301}, {1, 301}}, {3, 301}},
      {"rows of 2052 from cache", {{2, 2052}, {1, 2052}}, {2, 2052}},
      {"no bias, rows of 120", {{5, 120}}, {5, 120}},
      {"lower rank, thread per row", {{2, 3, 8, 8}, {8, 8}}, {2, 3, 8, 8}},
      {"full bias, thread per row", {{4, 6}, {4, 6}}, {4, 6}},
  };
  for (const Layout &l : last) {
    AttrMap attrs;
    attrs.set("axis",
              AttrValue::ofInts({static_cast<int64_t>(l.output.size() - 1)}));
    attrs.set("nan_to_zero", AttrValue::ofInts({0}));
    expectGpuMatchesCpu("softmax", attrs, l, {{"softmax", DeviceContext()}},
                        -3.f, 3.f, 1e-4f);
  }
  AttrMap last1;
  last1.set("axis", AttrValue::ofInts({1}));
  for (int64_t cols : {40, 120, 301, 512, 1100, 2048})
    expectGpuMatchesCpu("log_softmax", last1,
                        {"log-softmax", {{3, cols}}, {3, cols}},
                        {{"log_softmax", DeviceContext()}}, -3.f, 3.f, 1e-4f);
  AttrMap axis1;
  axis1.set("axis", AttrValue::ofInts({1}));
  axis1.set("nan_to_zero", AttrValue::ofInts({0}));
  expectGpuMatchesCpu("softmax", axis1,
                      {"another axis", {{2, 5, 3}, {1, 5, 1}}, {2, 5, 3}},
                      {{"softmax", DeviceContext()}}, -3.f, 3.f, 1e-4f);
}

TEST(GpuKernels, RmsNormWithAndWithoutScale) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  const Layout layouts[] = {
      {"16-byte rows", {{6, 64}}, {6, 64}},
      {"odd rows", {{5, 33}}, {5, 33}},
      {"scale per channel", {{2, 3, 64}, {64}}, {2, 3, 64}},
      {"one scale", {{3, 40}, {1}}, {3, 40}},
  };
  for (const Layout &l : layouts) {
    AttrMap attrs;
    attrs.set("axis",
              AttrValue::ofInts({static_cast<int64_t>(l.output.size() - 1)}));
    attrs.set("epsilon", AttrValue::ofFloats({1e-6}));
    expectGpuMatchesCpu("rms_norm", attrs, l, {{"rms_norm", DeviceContext()}},
                        -2.f, 2.f, 1e-5f);
  }
}

TEST(GpuKernels, ConcatOfShortRows) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  const Layout layouts[] = {
      {"rotary halves, 16-byte units",
       {{2, 4, 16, 32}, {2, 4, 16, 32}},
       {2, 4, 16, 64}},
      {"three parts of odd widths", {{6, 3}, {6, 5}, {6, 1}}, {6, 9}},
      {"an empty part", {{4, 0}, {4, 8}}, {4, 8}},
      {"long rows of channels-first halves",
       {{3, 2, 4096}, {3, 2, 4096}},
       {3, 2, 8192}},
  };
  // DenseNet's channels-last features: 40 parts (two launches), one wider.
  Layout dense{"41 parts, channels last", {{64, 64}}, {64, 64 + 40 * 32}};
  for (int k = 0; k < 40; ++k)
    dense.inputs.push_back({64, 32});
  std::vector<Layout> all(std::begin(layouts), std::end(layouts));
  all.push_back(dense);
  for (const Layout &l : all) {
    AttrMap attrs;
    attrs.set("axis",
              AttrValue::ofInts({static_cast<int64_t>(l.output.size() - 1)}));
    expectGpuMatchesCpu("concat", attrs, l, {{"concat", DeviceContext()}});
  }
}

TEST(GpuKernels, ResizeMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    const char *mode, *coordinates, *rounding;
    Shape in, out;
    std::vector<double> scales;
  };
  const Case cases[] = {
      {"linear",
       "half_pixel",
       "round_prefer_floor",
       {2, 3, 5, 7},
       {2, 3, 10, 14},
       {1, 1, 2, 2}},
      {"linear",
       "pytorch_half_pixel",
       "round_prefer_floor",
       {1, 2, 8, 8},
       {1, 2, 3, 5},
       {1, 1, 3.0 / 8, 5.0 / 8}},
      {"linear",
       "align_corners",
       "round_prefer_floor",
       {1, 4, 6, 6},
       {1, 4, 13, 9},
       {1, 1, 13.0 / 6, 1.5}},
      {"nearest",
       "asymmetric",
       "floor",
       {2, 3, 4, 4},
       {2, 3, 8, 8},
       {1, 1, 2, 2}},
      {"nearest",
       "half_pixel",
       "round_prefer_ceil",
       {1, 3, 5, 5},
       {1, 3, 7, 3},
       {1, 1, 1.4, 0.6}},
  };
  for (const Case &c : cases) {
    AttrMap attrs;
    attrs.set("mode", AttrValue::ofString(c.mode));
    attrs.set("coordinate_transformation_mode",
              AttrValue::ofString(c.coordinates));
    attrs.set("nearest_mode", AttrValue::ofString(c.rounding));
    attrs.set("scales", AttrValue::ofFloats(c.scales));
    std::string name = std::string(c.mode) + " " + c.coordinates;
    expectGpuMatchesCpu("resize", attrs, {name.c_str(), {c.in}, c.out},
                        {{"resize", DeviceContext()}}, -2.f, 2.f, 1e-6f);
  }
}

TEST(GpuKernels, GatherElementsMatchesCpuAndReportsBadIndices) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  TensorType data{DType::F32, {3, 5, 4}}, indices{DType::I64, {3, 2, 4}};
  TensorType outType{DType::F32, {3, 2, 4}};
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i) * 0.5f;
  std::vector<int64_t> idx(24);
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = static_cast<int64_t>(i * 7 % 10) - 5; // -5..4, negatives too
  AttrMap attrs;
  attrs.set("axis", AttrValue::ofInts({1}));
  std::unique_ptr<Kernel> cpu;
  ASSERT_TRUE(
      createCpuKernel("gather_elements", attrs, {data, indices}, {outType}, cpu)
          .ok());
  std::vector<float> expected(24);
  ASSERT_TRUE(cpu->run({{x.data(), data}, {idx.data(), indices}},
                       {{expected.data(), outType}})
                  .ok());
  void *dx, *di, *dy;
  ASSERT_EQ(cudaMalloc(&dx, 60 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&di, 24 * 8), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 24 * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), 60 * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(di, idx.data(), 24 * 8, cudaMemcpyHostToDevice);
  DeviceContext ctx;
  std::unique_ptr<GpuKernel> k;
  ASSERT_TRUE(createGpuKernel("gather_elements", attrs, {data, indices},
                              {outType}, ctx, k)
                  .ok() &&
              k);
  ASSERT_TRUE(k->run(ctx, {{dx, data}, {di, indices}}, {{dy, outType}}).ok());
  cudaDeviceSynchronize();
  EXPECT_TRUE(k->checkAfterRun().ok());
  std::vector<float> got(24);
  cudaMemcpy(got.data(), dy, 24 * 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(got, expected);
  idx[7] = 5; // one past the end of axis 1
  cudaMemcpy(di, idx.data(), 24 * 8, cudaMemcpyHostToDevice);
  ASSERT_TRUE(k->run(ctx, {{dx, data}, {di, indices}}, {{dy, outType}}).ok());
  cudaDeviceSynchronize();
  Status s = k->checkAfterRun();
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  cudaFree(dx);
  cudaFree(di);
  cudaFree(dy);
}

// Softmax cross-entropy and its gradient against the CPU's (double) sums:
// rows of a few classes, rows whose starts fall anywhere in a 16-byte
// unit (GPT-2's 50,257 classes), logits far from 0 on some rows, and a
// label out of range reported after the run; rows padded past their
// classes (a padded LM head's logits), whose gradient is zero there.
TEST(GpuKernels, CrossEntropyMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    int64_t rows, classes, pitch;
  };
  for (Case c :
       {Case{5, 10, 10}, Case{7, 1000, 1000}, Case{6, 4099, 4099},
        Case{9, 50257, 50257}, Case{9, 50257, 50272}, Case{4, 1030, 1033}}) {
    SCOPED_TRACE(std::to_string(c.rows) + " x " + std::to_string(c.classes) +
                 " of " + std::to_string(c.pitch));
    TensorType logitsType{DType::F32, {c.rows, c.pitch}};
    TensorType labelsType{DType::I64, {c.rows}}, scalar{DType::F32, {}};
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform(-8.f, 8.f);
    std::vector<float> logits(c.rows * c.pitch);
    for (size_t i = 0; i < logits.size(); ++i)
      logits[i] = uniform(rng) + (i / c.pitch % 3 == 1 ? 60.f : 0.f);
    std::vector<int64_t> labels(c.rows);
    for (int64_t r = 0; r < c.rows; ++r)
      labels[r] = (r * 7919 + 3) % c.classes;
    float dloss = 0.75f;
    AttrMap attrs;
    if (c.pitch != c.classes)
      attrs.set("classes", AttrValue::ofInts({c.classes}));
    std::unique_ptr<Kernel> cpuLoss, cpuGrad;
    ASSERT_TRUE(createCpuKernel("softmax_cross_entropy", attrs,
                                {logitsType, labelsType}, {scalar}, cpuLoss)
                    .ok());
    ASSERT_TRUE(createCpuKernel("softmax_cross_entropy_grad", attrs,
                                {logitsType, labelsType, scalar}, {logitsType},
                                cpuGrad)
                    .ok());
    float expectedLoss = 0;
    // NaN wherever the CPU does not write (it must write the padding too).
    std::vector<float> expectedGrad(logits.size(), NAN);
    ASSERT_TRUE(
        cpuLoss
            ->run({{logits.data(), logitsType}, {labels.data(), labelsType}},
                  {{&expectedLoss, scalar}})
            .ok());
    ASSERT_TRUE(cpuGrad
                    ->run({{logits.data(), logitsType},
                           {labels.data(), labelsType},
                           {&dloss, scalar}},
                          {{expectedGrad.data(), logitsType}})
                    .ok());

    float *dLogits, *dLoss, *dDloss, *dGrad;
    int64_t *dLabels;
    ASSERT_EQ(cudaMalloc(&dLogits, logitsType.byteSize()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dGrad, logitsType.byteSize()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dLabels, labelsType.byteSize()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dLoss, 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dDloss, 4), cudaSuccess);
    cudaMemcpy(dLogits, logits.data(), logitsType.byteSize(),
               cudaMemcpyHostToDevice);
    cudaMemcpy(dLabels, labels.data(), labelsType.byteSize(),
               cudaMemcpyHostToDevice);
    cudaMemcpy(dDloss, &dloss, 4, cudaMemcpyHostToDevice);
    cudaMemset(dGrad, 0xff, logitsType.byteSize()); // NaN until written
    DeviceContext ctx;
    std::unique_ptr<GpuKernel> loss, grad;
    ASSERT_TRUE(createGpuKernel("softmax_cross_entropy", attrs,
                                {logitsType, labelsType}, {scalar}, ctx, loss)
                    .ok() &&
                loss);
    ASSERT_TRUE(createGpuKernel("softmax_cross_entropy_grad", attrs,
                                {logitsType, labelsType, scalar}, {logitsType},
                                ctx, grad)
                    .ok() &&
                grad);
    ASSERT_TRUE(loss->run(ctx, {{dLogits, logitsType}, {dLabels, labelsType}},
                          {{dLoss, scalar}})
                    .ok());
    ASSERT_TRUE(grad->run(ctx,
                          {{dLogits, logitsType},
                           {dLabels, labelsType},
                           {dDloss, scalar}},
                          {{dGrad, logitsType}})
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(loss->checkAfterRun().ok());
    EXPECT_TRUE(grad->checkAfterRun().ok());
    float gotLoss = 0;
    std::vector<float> gotGrad(logits.size());
    cudaMemcpy(&gotLoss, dLoss, 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(gotGrad.data(), dGrad, logitsType.byteSize(),
               cudaMemcpyDeviceToHost);
    EXPECT_NEAR(gotLoss, expectedLoss, 2e-6 * std::fabs(expectedLoss));
    // Each gradient is p * scale with p < 1: compare against the scale.
    double scale = dloss / static_cast<double>(c.rows);
    size_t worst = 0;
    for (size_t i = 0; i < gotGrad.size(); ++i) {
      ASSERT_FALSE(std::isnan(expectedGrad[i]) || std::isnan(gotGrad[i]))
          << "element " << i << " left unwritten";
      if (i % c.pitch >= static_cast<size_t>(c.classes)) {
        ASSERT_EQ(gotGrad[i], 0.f) << "padding at " << i;
      }
      if (std::fabs(gotGrad[i] - expectedGrad[i]) >
          std::fabs(gotGrad[worst] - expectedGrad[worst]))
        worst = i;
    }
    EXPECT_NEAR(gotGrad[worst], expectedGrad[worst],
                2e-6 * scale + 2e-6 * std::fabs(expectedGrad[worst]))
        << "at " << worst;

    labels[c.rows - 1] = c.classes; // one past the last class (padding)
    cudaMemcpy(dLabels, labels.data(), labelsType.byteSize(),
               cudaMemcpyHostToDevice);
    ASSERT_TRUE(loss->run(ctx, {{dLogits, logitsType}, {dLabels, labelsType}},
                          {{dLoss, scalar}})
                    .ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    Status bad = loss->checkAfterRun();
    EXPECT_NE(bad.message().find("outside the"), std::string::npos)
        << bad.message();
    for (void *p : {static_cast<void *>(dLogits), static_cast<void *>(dGrad),
                    static_cast<void *>(dLabels), static_cast<void *>(dLoss),
                    static_cast<void *>(dDloss)})
      cudaFree(p);
  }
}

class DropoutOffsets : public ::testing::TestWithParam<int64_t> {};

// Offsets: a slice of the batch that starts anywhere in a group of four.
INSTANTIATE_TEST_SUITE_P(GpuKernels, DropoutOffsets,
                         ::testing::Values(0, 1, 6, 8, 4099 * 3 + 2));

TEST_P(DropoutOffsets, DropoutDrawsTheCpuMask) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  // 4096: whole groups of four (the vectorized path where the offset is
  // a multiple of four too); 4099: a partial group at the end.
  for (int64_t n : {4099, 4096}) {
    TensorType x{DType::F32, {n}}, scalar{DType::I64, {}};
    AttrMap attrs;
    attrs.set("ratio", AttrValue::ofFloats({0.2}));
    attrs.set("stream", AttrValue::ofInts({5}));
    attrs.set("offset", AttrValue::ofInts({GetParam()}));
    std::vector<float> in(n);
    for (int64_t i = 0; i < n; ++i)
      in[i] = static_cast<float>(i % 97) * 0.25f - 3.0f;
    int64_t step = 123456789012345, seed = -7;
    std::unique_ptr<Kernel> cpu;
    ASSERT_TRUE(
        createCpuKernel("dropout", attrs, {x, scalar, scalar}, {x}, cpu).ok());
    std::vector<float> expected(n);
    ASSERT_TRUE(cpu->run({{in.data(), x}, {&step, scalar}, {&seed, scalar}},
                         {{expected.data(), x}})
                    .ok());
    void *dx, *dy, *dstep, *dseed;
    ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dy, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dstep, 8), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dseed, 8), cudaSuccess);
    cudaMemcpy(dx, in.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dstep, &step, 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dseed, &seed, 8, cudaMemcpyHostToDevice);
    DeviceContext ctx;
    std::unique_ptr<GpuKernel> k;
    ASSERT_TRUE(
        createGpuKernel("dropout", attrs, {x, scalar, scalar}, {x}, ctx, k)
            .ok() &&
        k);
    ASSERT_TRUE(
        k->run(ctx, {{dx, x}, {dstep, scalar}, {dseed, scalar}}, {{dy, x}})
            .ok());
    cudaDeviceSynchronize();
    std::vector<float> got(n);
    cudaMemcpy(got.data(), dy, n * 4, cudaMemcpyDeviceToHost);
    EXPECT_EQ(got, expected);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dstep);
    cudaFree(dseed);
  }
}

} // namespace

// Reductions over leading or trailing axes take the coalesced kernels
// (bias gradients in row chunks, layer norm's statistics); others the
// general one.
TEST(GpuKernels, ReductionsMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    const char *kernel;
    Layout layout;
    std::vector<int64_t> axes;
  };
  const Case cases[] = {
      {"reduce_sum", {"leading, bias gradient", {{512, 200}}, {1, 200}}, {0}},
      {"reduce_max", {"leading, row chunks", {{3001, 64}}, {1, 64}}, {0}},
      {"reduce_sum", {"two leading", {{4, 100, 136}}, {1, 1, 136}}, {0, 1}},
      {"reduce_mean", {"trailing, layer norm", {{600, 77}}, {600, 1}}, {1}},
      {"reduce_max", {"two trailing", {{520, 3, 9}}, {520, 1, 1}}, {1, 2}},
      {"reduce_min", {"leading, few rows", {{3, 130}}, {1, 130}}, {0}},
      {"reduce_sum",
       {"middle, one column a thread", {{8, 50, 6}}, {8, 1, 6}},
       {1}},
      // Global pools channels last: four columns a thread, then more
      // columns than a block has threads (the general kernel), then a
      // map that takes row chunks.
      {"reduce_mean",
       {"channels-last pool", {{4, 7, 7, 64}}, {4, 1, 1, 64}},
       {1, 2}},
      {"reduce_max", {"wide pool", {{2, 9, 2048}}, {2, 1, 2048}}, {1}},
      {"reduce_max", {"pool in chunks", {{3, 3000, 12}}, {3, 1, 12}}, {1}},
      {"reduce_sum", {"outer and inner kept", {{6, 5, 7}}, {1, 5, 1}}, {0, 2}},
  };
  for (const Case &c : cases) {
    AttrMap attrs;
    attrs.set("axes", AttrValue::ofInts(c.axes));
    attrs.set("keepdims", AttrValue::ofInts({1}));
    expectGpuMatchesCpu(c.kernel, attrs, c.layout,
                        {{c.kernel, DeviceContext()}}, -2.f, 2.f, 1e-4f);
  }
  // Sums of thousands of rows, in row chunks: positive values, so that the
  // order of float additions stays within the relative bound (signed ones
  // cancel to near zero).
  const Case chunked[] = {
      {"reduce_mean",
       {"SE pool in chunks", {{2, 112, 112, 32}}, {2, 1, 1, 32}},
       {1, 2}},
      {"reduce_sum", {"leading, GPT-2's bias", {{4096, 768}}, {1, 768}}, {0}},
      {"reduce_mean", {"leading, odd columns", {{2000, 37}}, {1, 37}}, {0}},
      {"reduce_sum", {"leading, wide", {{1500, 3072}}, {1, 3072}}, {0}},
  };
  for (const Case &c : chunked) {
    AttrMap attrs;
    attrs.set("axes", AttrValue::ofInts(c.axes));
    attrs.set("keepdims", AttrValue::ofInts({1}));
    expectGpuMatchesCpu(c.kernel, attrs, c.layout,
                        {{c.kernel, DeviceContext()}}, 0.25f, 2.f, 1e-5f);
  }
}

// Softmax's gradient in one pass: attention's rows (16 bytes a load), rows
// whose width is not a multiple of four, and an axis that is not the last.
TEST(GpuKernels, SoftmaxGradMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    Layout layout;
    int64_t axis;
  };
  const Case cases[] = {
      {{"attention rows", {{2, 3, 16, 256}, {2, 3, 16, 256}}, {2, 3, 16, 256}},
       3},
      {{"odd rows", {{40, 77}, {40, 77}}, {40, 77}}, 1},
      {{"rows past registers", {{8, 2048}, {8, 2048}}, {8, 2048}}, 1},
      {{"middle axis", {{4, 33, 5}, {4, 33, 5}}, {4, 33, 5}}, 1},
  };
  for (const Case &c : cases) {
    AttrMap attrs;
    attrs.set("axis", AttrValue::ofInts({c.axis}));
    expectGpuMatchesCpu("softmax_grad", attrs, c.layout,
                        {{"softmax_grad", DeviceContext()}}, 0.25f, 2.f, 1e-5f);
  }
}

// softmax_grad reading its gradient through a folded dropout draws the
// CPU's mask: attention's rows four elements a draw (kept in registers),
// odd rows and offsets inside a group of four one element a draw, rows
// too wide for registers, and a middle axis.
TEST(GpuKernels, SoftmaxGradWithFoldedDropoutMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    Shape shape;
    int64_t axis, offset;
  };
  const Case cases[] = {{{2, 3, 16, 256}, 3, 0},
                        {{2, 3, 16, 256}, 3, 98304 + 6},
                        {{40, 77}, 1, 4},
                        {{8, 2048}, 1, 0},
                        {{4, 33, 5}, 1, 8}};
  for (const Case &c : cases) {
    SCOPED_TRACE("axis " + std::to_string(c.axis) + ", offset " +
                 std::to_string(c.offset));
    TensorType x{DType::F32, c.shape}, scalar{DType::I64, {}};
    int64_t n = x.numElements(), step = 77, seed = 31337;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> uniform(0.25f, 2.f);
    std::vector<float> dz(n), p(n);
    for (int64_t i = 0; i < n; ++i) {
      dz[i] = uniform(rng);
      p[i] = uniform(rng);
    }
    AttrMap attrs;
    attrs.set("axis", AttrValue::ofInts({c.axis}));
    attrs.set("dropout_ratio", AttrValue::ofFloats({0.1}));
    attrs.set("dropout_stream", AttrValue::ofInts({12}));
    attrs.set("dropout_offset", AttrValue::ofInts({c.offset}));
    std::unique_ptr<Kernel> cpu;
    ASSERT_TRUE(
        createCpuKernel("softmax_grad", attrs, {x, x, scalar, scalar}, {x}, cpu)
            .ok());
    std::vector<float> expected(n);
    ASSERT_TRUE(cpu->run({{dz.data(), x},
                          {p.data(), x},
                          {&step, scalar},
                          {&seed, scalar}},
                         {{expected.data(), x}})
                    .ok());
    void *ddz, *dp, *dx, *dstep, *dseed;
    ASSERT_EQ(cudaMalloc(&ddz, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dp, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dstep, 8), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dseed, 8), cudaSuccess);
    cudaMemcpy(ddz, dz.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dp, p.data(), n * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dstep, &step, 8, cudaMemcpyHostToDevice);
    cudaMemcpy(dseed, &seed, 8, cudaMemcpyHostToDevice);
    DeviceContext ctx;
    std::unique_ptr<GpuKernel> k;
    ASSERT_TRUE(createGpuKernel("softmax_grad", attrs, {x, x, scalar, scalar},
                                {x}, ctx, k)
                    .ok() &&
                k);
    ASSERT_TRUE(k->run(ctx,
                       {{ddz, x}, {dp, x}, {dstep, scalar}, {dseed, scalar}},
                       {{dx, x}})
                    .ok());
    std::vector<float> got(n);
    ASSERT_EQ(cudaMemcpy(got.data(), dx, n * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-5f * std::fabs(expected[i]) + 1e-6f)
          << "element " << i;
    for (void *d : {ddz, dp, dx, dstep, dseed})
      cudaFree(d);
  }
}

// A bias gradient over many rows is summed in row chunks that the last
// block to finish combines: runs after the first (a captured graph's
// replays) must find the arrival counters reset and give the same bits.
TEST(GpuKernels, ChunkedBiasGradientIsTheSameEveryRun) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  TensorType in{DType::F32, {4096, 768}}, out{DType::F32, {1, 768}};
  std::vector<float> x(4096 * 768);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>(i % 97) * 0.01f - 0.4f;
  AttrMap attrs;
  attrs.set("axes", AttrValue::ofInts({0}));
  attrs.set("keepdims", AttrValue::ofInts({1}));
  DeviceContext ctx;
  std::unique_ptr<GpuKernel> k;
  ASSERT_TRUE(createGpuKernel("reduce_sum", attrs, {in}, {out}, ctx, k).ok());
  ASSERT_TRUE(k);
  ASSERT_GT(k->workspaceBytes(), 0u) << "expected the chunked kernel";
  void *dx, *dy;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 768 * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ctx.workspace, k->workspaceBytes()), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  std::vector<float> first(768), again(768);
  for (int run = 0; run < 4; ++run) {
    cudaMemset(dy, 0xff, 768 * 4);
    ASSERT_TRUE(k->run(ctx, {{dx, in}}, {{dy, out}}).ok());
    std::vector<float> &got = run == 0 ? first : again;
    ASSERT_EQ(cudaMemcpy(got.data(), dy, 768 * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    if (run > 0) {
      ASSERT_EQ(0, std::memcmp(first.data(), again.data(), 768 * 4))
          << "run " << run;
    }
  }
  for (int c = 0; c < 768; ++c) {
    double sum = 0;
    for (int r = 0; r < 4096; ++r)
      sum += x[static_cast<size_t>(r) * 768 + c];
    ASSERT_NEAR(first[c], sum, 1e-4 * std::fabs(sum) + 1e-3) << "column " << c;
  }
  cudaFree(dx);
  cudaFree(dy);
  cudaFree(ctx.workspace);
}

// An embedding's gradient: many rows added into few, repeated rows
// included, as the CPU adds them (up to the order of float additions).
TEST(GpuKernels, ScatterAddOfRepeatedRowsMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  TensorType data{DType::F32, {50, 96}}, indices{DType::I64, {700, 1}},
      updates{DType::F32, {700, 96}};
  std::vector<float> x(50 * 96, 0.5f), u(700 * 96);
  for (size_t i = 0; i < u.size(); ++i)
    u[i] = static_cast<float>(i % 13) * 0.25f - 1.f;
  std::vector<int64_t> idx(700);
  for (size_t i = 0; i < idx.size(); ++i)
    idx[i] = static_cast<int64_t>(i * i % 50);
  AttrMap attrs;
  attrs.set("reduction", AttrValue::ofString("add"));
  std::unique_ptr<Kernel> cpu;
  ASSERT_TRUE(createCpuKernel("scatter_nd", attrs, {data, indices, updates},
                              {data}, cpu)
                  .ok());
  std::vector<float> expected(x.size());
  ASSERT_TRUE(
      cpu->run({{x.data(), data}, {idx.data(), indices}, {u.data(), updates}},
               {{expected.data(), data}})
          .ok());
  void *dx, *di, *du, *dy;
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&di, idx.size() * 8), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&du, u.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, x.size() * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(di, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice);
  cudaMemcpy(du, u.data(), u.size() * 4, cudaMemcpyHostToDevice);
  DeviceContext ctx;
  std::unique_ptr<GpuKernel> k;
  ASSERT_TRUE(createGpuKernel("scatter_nd", attrs, {data, indices, updates},
                              {data}, ctx, k)
                  .ok() &&
              k);
  ASSERT_TRUE(
      k->run(ctx, {{dx, data}, {di, indices}, {du, updates}}, {{dy, data}})
          .ok());
  cudaDeviceSynchronize();
  EXPECT_TRUE(k->checkAfterRun().ok());
  std::vector<float> got(x.size());
  cudaMemcpy(got.data(), dy, x.size() * 4, cudaMemcpyDeviceToHost);
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], 1e-5f * std::fabs(expected[i]) + 1e-5f)
        << "element " << i;
  idx[9] = 50; // past the end
  cudaMemcpy(di, idx.data(), idx.size() * 8, cudaMemcpyHostToDevice);
  ASSERT_TRUE(
      k->run(ctx, {{dx, data}, {di, indices}, {du, updates}}, {{dy, data}})
          .ok());
  cudaDeviceSynchronize();
  EXPECT_FALSE(k->checkAfterRun().ok());
  for (void *p : {dx, di, du, dy})
    cudaFree(p);
}

// Plan devices on one GPU average through the peer-read kernel, directly
// and replayed from a CUDA graph (the second run), with the CPU's bits.
TEST(CudaExecutor, AllReduceOfDevicesSharingAGpuMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  using namespace partc::runtime::testing;
  for (int devices : {2, 3}) {
    for (bool graphs : {false, true}) {
      Plan plan = allReducePlan(devices);
      std::vector<float> x;
      for (int i = 0; i < devices * 4; ++i)
        x.push_back(0.37f * float(i * i % 11) - 1.1f);
      std::vector<float> want(4), got(4);
      std::unique_ptr<CpuExecutor> cpu;
      ASSERT_TRUE(CpuExecutor::create(plan, cpu).ok());
      ASSERT_TRUE(cpu->run({{x.data(), plan.inputs[0].type}},
                           {{want.data(), plan.outputs[0].type}})
                      .ok());
      CudaOptions options;
      options.devicesPerGpu = devices;
      options.graphs = graphs;
      std::unique_ptr<CudaExecutor> gpu;
      Status s = CudaExecutor::create(plan, options, gpu);
      ASSERT_TRUE(s.ok()) << s.message();
      for (int rep = 0; rep < 3; ++rep) {
        std::fill(got.begin(), got.end(), 0.0f);
        s = gpu->run({{x.data(), plan.inputs[0].type}},
                     {{got.data(), plan.outputs[0].type}});
        ASSERT_TRUE(s.ok()) << s.message();
        EXPECT_EQ(got, want)
            << devices << " devices, graphs " << graphs << ", run " << rep;
      }
    }
  }
}

namespace {

/// Runs kernel `name` on the CPU and the GPU over the same `input` bytes
/// and expects every output to be identical, byte for byte.
void expectAxisKernelMatchesCpu(const std::string &name, const AttrMap &attrs,
                                const TensorType &in,
                                const std::vector<uint8_t> &input,
                                const std::vector<TensorType> &outs) {
  SCOPED_TRACE(name + " over " + in.str());
  std::unique_ptr<Kernel> cpu;
  ASSERT_TRUE(createCpuKernel(name, attrs, {in}, outs, cpu).ok());
  std::vector<std::vector<uint8_t>> expected, got;
  std::vector<TensorRef> cpuOut;
  for (const TensorType &t : outs) {
    expected.emplace_back(t.byteSize(), 0xab);
    cpuOut.push_back({expected.back().data(), t});
  }
  std::vector<uint8_t> hostIn = input;
  ASSERT_TRUE(cpu->run({{hostIn.data(), in}}, cpuOut).ok());
  DeviceContext ctx;
  std::unique_ptr<GpuKernel> k;
  Status s = createGpuKernel(name, attrs, {in}, outs, ctx, k);
  ASSERT_TRUE(s.ok() && k) << s.message();
  void *dx = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, input.size()), cudaSuccess);
  cudaMemcpy(dx, input.data(), input.size(), cudaMemcpyHostToDevice);
  std::vector<TensorRef> gpuOut;
  for (const TensorType &t : outs) {
    void *d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, t.byteSize()), cudaSuccess);
    gpuOut.push_back({d, t});
  }
  ASSERT_TRUE(k->run(ctx, {{dx, in}}, gpuOut).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<uint8_t> host(outs[i].byteSize());
    cudaMemcpy(host.data(), gpuOut[i].data, host.size(),
               cudaMemcpyDeviceToHost);
    EXPECT_TRUE(host == expected[i]) << "output " << i << " differs";
    cudaFree(gpuOut[i].data);
  }
  cudaFree(dx);
}

template <class T> std::vector<uint8_t> bytesOf(const std::vector<T> &v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

} // namespace

// Lines long and short, along the last axis and a middle one, with many
// ties (small integers) and NaNs, as the CPU orders them.
TEST(GpuKernels, ArgReduceCumSumAndTopKMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(0, 9);
  for (Shape shape : {Shape{6, 3000}, Shape{4, 37, 5}, Shape{1, 1, 70000}}) {
    int64_t axis = shape.size() == 2 ? 1 : shape.size() - 2 + (shape[2] > 5);
    TensorType in{DType::F32, shape};
    std::vector<float> x(in.numElements());
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = i % 97 == 5 ? NAN : float(small(rng));
    Shape reduced = shape;
    reduced[axis] = 1;
    for (const char *name : {"arg_max", "arg_min"})
      for (int64_t last : {0, 1}) {
        AttrMap attrs;
        attrs.set("axis", AttrValue::ofInts({axis}));
        attrs.set("keepdims", AttrValue::ofInts({1}));
        attrs.set("select_last_index", AttrValue::ofInts({last}));
        expectAxisKernelMatchesCpu(name, attrs, in, bytesOf(x),
                                   {{DType::I64, reduced}});
      }
    for (int64_t largest : {0, 1}) {
      Shape top = shape;
      top[axis] = std::min<int64_t>(7, shape[axis]);
      AttrMap attrs;
      attrs.set("axis", AttrValue::ofInts({axis}));
      attrs.set("k", AttrValue::ofInts({top[axis]}));
      attrs.set("largest", AttrValue::ofInts({largest}));
      expectAxisKernelMatchesCpu("top_k", attrs, in, bytesOf(x),
                                 {{DType::F32, top}, {DType::I64, top}});
    }
    // Integer sums are exact, so the scan order does not matter.
    TensorType ints{DType::I64, shape};
    std::vector<int64_t> xi(ints.numElements());
    for (size_t i = 0; i < xi.size(); ++i)
      xi[i] = small(rng) - 4;
    for (int64_t mode = 0; mode < 4; ++mode) {
      AttrMap attrs;
      attrs.set("axis", AttrValue::ofInts({axis}));
      attrs.set("exclusive", AttrValue::ofInts({mode & 1}));
      attrs.set("reverse", AttrValue::ofInts({mode >> 1}));
      expectAxisKernelMatchesCpu("cum_sum", attrs, ints, bytesOf(xi), {ints});
    }
  }
}

namespace {

/// Runs kernel `name` channels last on the GPU (with a cuDNN handle, TF32
/// off and its workspace) and on the CPU reference, from the same random
/// inputs, and compares every output within `rtol` of its largest value.
void expectChannelsLastMatchesCpu(const std::string &name, AttrMap attrs,
                                  const std::vector<TensorType> &ins,
                                  const std::vector<TensorType> &outs,
                                  float rtol = 1e-4f) {
  SCOPED_TRACE(name + " channels last");
  attrs.set("channels_last", AttrValue::ofInts({1}));
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<std::vector<float>> host;
  std::vector<TensorRef> cpuIn, gpuIn;
  for (const TensorType &t : ins) {
    host.emplace_back(t.numElements());
    for (float &v : host.back())
      v = uniform(rng);
  }
  // Batch norm's gradient reads a variance: it must be positive.
  if (name == "batch_norm_grad")
    for (float &v : host[4])
      v = std::fabs(v) + 0.5f;
  std::vector<std::vector<float>> expected;
  std::vector<TensorRef> cpuOut;
  for (size_t i = 0; i < ins.size(); ++i)
    cpuIn.push_back({host[i].data(), ins[i]});
  for (const TensorType &t : outs)
    expected.emplace_back(t.numElements());
  for (size_t i = 0; i < outs.size(); ++i)
    cpuOut.push_back({expected[i].data(), outs[i]});
  std::unique_ptr<Kernel> cpu;
  Status made = createCpuKernel(name, attrs, ins, outs, cpu);
  ASSERT_TRUE(made.ok()) << made.message();
  ASSERT_TRUE(cpu->run(cpuIn, cpuOut).ok());

  DeviceContext ctx;
  ctx.options.tf32 = false;
  ASSERT_EQ(cudnnCreate(&ctx.cudnn), CUDNN_STATUS_SUCCESS);
  std::unique_ptr<GpuKernel> k;
  Status s = createGpuKernel(name, attrs, ins, outs, ctx, k);
  ASSERT_TRUE(s.ok() && k) << s.message() << " (no GPU kernel)";
  ctx.workspaceBytes = k->workspaceBytes();
  ASSERT_EQ(cudaMalloc(&ctx.workspace, std::max<size_t>(ctx.workspaceBytes, 1)),
            cudaSuccess);
  for (size_t i = 0; i < ins.size(); ++i) {
    void *d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, ins[i].byteSize()), cudaSuccess);
    cudaMemcpy(d, host[i].data(), ins[i].byteSize(), cudaMemcpyHostToDevice);
    gpuIn.push_back({d, ins[i]});
  }
  std::vector<TensorRef> gpuOut;
  for (const TensorType &t : outs) {
    void *d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, t.byteSize()), cudaSuccess);
    gpuOut.push_back({d, t});
  }
  ASSERT_TRUE(k->run(ctx, gpuIn, gpuOut).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<float> got(outs[i].numElements());
    cudaMemcpy(got.data(), gpuOut[i].data, outs[i].byteSize(),
               cudaMemcpyDeviceToHost);
    float scale = 1e-6f;
    for (float v : expected[i])
      scale = std::max(scale, std::fabs(v));
    for (size_t j = 0; j < got.size(); ++j)
      ASSERT_NEAR(got[j], expected[i][j], rtol * scale)
          << "output " << i << ", element " << j;
    cudaFree(gpuOut[i].data);
  }
  for (TensorRef &r : gpuIn)
    cudaFree(r.data);
  cudaFree(ctx.workspace);
  cudnnDestroy(ctx.cudnn);
}

AttrMap windowAttrs(std::vector<int64_t> strides, std::vector<int64_t> pads) {
  AttrMap attrs;
  attrs.set("strides", AttrValue::ofInts(strides));
  attrs.set("pads", AttrValue::ofInts(pads));
  attrs.set("dilations", AttrValue::ofInts({1, 1}));
  attrs.set("group", AttrValue::ofInts({1}));
  return attrs;
}

} // namespace

// The kernels partc-convert-layout gives a training step: convolution
// gradients through cuDNN in NHWC, batch norm's statistics summed over
// channels-last rows (more channels than one block's 32, and fewer; with
// the residual add and ReLU partc-fuse-activations gives it), and
// pooling's gradient scattered to channels-last positions.
TEST(GpuKernels, ChannelsLastTrainingKernelsMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  auto f32 = [](Shape s) { return TensorType{DType::F32, std::move(s)}; };
  // A 3x3 stride-2 convolution of [2, 9, 9, 8] by 12 filters: [2, 5, 5, 12].
  AttrMap conv = windowAttrs({2, 2}, {1, 1, 1, 1});
  expectChannelsLastMatchesCpu("conv_grad_input", conv,
                               {f32({2, 5, 5, 12}), f32({12, 3, 3, 8})},
                               {f32({2, 9, 9, 8})});
  expectChannelsLastMatchesCpu("conv_grad_weight", conv,
                               {f32({2, 9, 9, 8}), f32({2, 5, 5, 12})},
                               {f32({12, 3, 3, 8})});
  AttrMap norm;
  norm.set("epsilon", AttrValue::ofFloats({1e-5}));
  for (int64_t channels : {24, 72}) {
    Shape x{3, 7, 5, channels};
    expectChannelsLastMatchesCpu("batch_norm_train", norm,
                                 {f32(x), f32({channels}), f32({channels})},
                                 {f32(x), f32({channels}), f32({channels})});
    expectChannelsLastMatchesCpu(
        "batch_norm_grad", norm,
        {f32(x), f32(x), f32({channels}), f32({channels}), f32({channels})},
        {f32(x), f32({channels}), f32({channels})});
  }
  // The fused epilogue: a residual addend, then ReLU.
  AttrMap fused = norm;
  fused.set("activation", AttrValue::ofString("relu"));
  Shape x{3, 7, 5, 40};
  expectChannelsLastMatchesCpu("batch_norm_train", fused,
                               {f32(x), f32({40}), f32({40}), f32(x)},
                               {f32(x), f32({40}), f32({40})});
  // ReLU's gradient fused into the norm's: dy masked where the norm's
  // output, computed again from the bias (input 5), is not positive.
  expectChannelsLastMatchesCpu(
      "batch_norm_grad", fused,
      {f32(x), f32(x), f32({40}), f32({40}), f32({40}), f32({40})},
      {f32(x), f32({40}), f32({40})});
  // Pooling gradients gathered per input element: overlapping windows
  // (ResNet's stem, on even and odd sizes), dilated windows, and padding
  // counted in the average.
  AttrMap pool = windowAttrs({2, 2}, {1, 1, 1, 1});
  pool.set("kernel_shape", AttrValue::ofInts({3, 3}));
  expectChannelsLastMatchesCpu("max_pool_grad", pool,
                               {f32({2, 4, 4, 6}), f32({2, 8, 8, 6})},
                               {f32({2, 8, 8, 6})});
  expectChannelsLastMatchesCpu("max_pool_grad", pool,
                               {f32({2, 5, 5, 8}), f32({2, 9, 9, 8})},
                               {f32({2, 9, 9, 8})});
  pool.set("input_shape", AttrValue::ofInts({2, 8, 8, 6}));
  expectChannelsLastMatchesCpu("avg_pool_grad", pool, {f32({2, 4, 4, 6})},
                               {f32({2, 8, 8, 6})});
  pool.set("input_shape", AttrValue::ofInts({2, 9, 9, 8}));
  pool.set("count_include_pad", AttrValue::ofInts({1}));
  expectChannelsLastMatchesCpu("avg_pool_grad", pool, {f32({2, 5, 5, 8})},
                               {f32({2, 9, 9, 8})});
  AttrMap dilated = windowAttrs({1, 1}, {0, 0, 0, 0});
  dilated.set("dilations", AttrValue::ofInts({2, 2}));
  dilated.set("kernel_shape", AttrValue::ofInts({2, 2}));
  expectChannelsLastMatchesCpu("max_pool_grad", dilated,
                               {f32({1, 4, 4, 4}), f32({1, 6, 6, 4})},
                               {f32({1, 6, 6, 4})});
}

// Windows that are nearly all padding (kernel_shape 2^20 and 2^30 over an
// input of three rows, pads to match): the kernels visit only the taps in
// the input, in 32-bit indices for the first and 64-bit for the second.
TEST(GpuKernels, PoolingWindowsOfPaddingMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  auto f32 = [](Shape s) { return TensorType{DType::F32, std::move(s)}; };
  for (int64_t taps : {int64_t(1) << 20, int64_t(1) << 30}) {
    SCOPED_TRACE(taps);
    AttrMap pool = windowAttrs({taps, 1}, {taps - 1, 0, taps - 1, 0});
    pool.set("kernel_shape", AttrValue::ofInts({taps, 1}));
    pool.set("ceil_mode", AttrValue::ofInts({0}));
    for (int64_t channels : {4, 3}) {
      Shape x = {1, 3, 2, channels}, y = {1, 2, 2, channels};
      pool.set("input_shape", AttrValue::ofInts(x));
      for (int includePad : {0, 1}) {
        pool.set("count_include_pad", AttrValue::ofInts({includePad}));
        expectChannelsLastMatchesCpu("avg_pool", pool, {f32(x)}, {f32(y)});
        expectChannelsLastMatchesCpu("avg_pool_grad", pool, {f32(y)}, {f32(x)});
      }
      expectChannelsLastMatchesCpu("max_pool", pool, {f32(x)}, {f32(y)});
      expectChannelsLastMatchesCpu("max_pool_grad", pool, {f32(y), f32(x)},
                                   {f32(x)});
    }
  }
}

// Layer norm's gradient, with and without an addend: a warp per row where
// rows are a multiple of 128 floats up to 1024 (GPT-2's 768 and 1024), a
// block per row otherwise;
// the scale's and bias's gradients summed over shares of the rows. (The
// helper's channels_last attribute means nothing to this kernel.)
TEST(GpuKernels, LayerNormGradMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  auto f32 = [](Shape s) { return TensorType{DType::F32, std::move(s)}; };
  AttrMap attrs;
  attrs.set("epsilon", AttrValue::ofFloats({1e-5}));
  for (Shape x :
       {Shape{37, 768}, Shape{2, 19, 1024}, Shape{3, 5, 100}, Shape{6, 2048}}) {
    attrs.set("axis", AttrValue::ofInts({static_cast<int64_t>(x.size()) - 1}));
    Shape norm{x.back()};
    expectChannelsLastMatchesCpu("layer_norm_grad", attrs,
                                 {f32(x), f32(x), f32(norm)},
                                 {f32(x), f32(norm), f32(norm)});
    // With a residual gradient added to the input's (both row kernels).
    expectChannelsLastMatchesCpu("layer_norm_grad", attrs,
                                 {f32(x), f32(x), f32(norm), f32(x)},
                                 {f32(x), f32(norm), f32(norm)});
  }
}

// The optimizer updates in place, 16 bytes at a time where every tensor is
// aligned (with a tail of elements past the last whole unit), element by
// element where one is not: both against the CPU's, after three steps.
TEST(GpuKernels, OptimizerUpdatesMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  auto f32 = [](int64_t n) { return TensorType{DType::F32, {n}}; };
  TensorType step{DType::I64, {}};
  AttrMap adamw;
  adamw.set("lr", AttrValue::ofFloats({1e-3}));
  adamw.set("beta1", AttrValue::ofFloats({0.9}));
  adamw.set("beta2", AttrValue::ofFloats({0.999}));
  adamw.set("eps", AttrValue::ofFloats({1e-8}));
  adamw.set("weight_decay", AttrValue::ofFloats({0.01}));
  AttrMap sgd;
  sgd.set("lr", AttrValue::ofFloats({0.1}));
  sgd.set("momentum", AttrValue::ofFloats({0.9}));
  sgd.set("weight_decay", AttrValue::ofFloats({1e-4}));
  struct Case {
    const char *kernel;
    const AttrMap *attrs;
    int states; // tensors updated besides the parameter
  };
  for (Case c : {Case{"adamw_update", &adamw, 2}, Case{"sgd_update", &sgd, 1}})
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(4099), int64_t(1 << 16)})
      for (int64_t misalign : {0, 1}) {
        SCOPED_TRACE(std::string(c.kernel) + " n=" + std::to_string(n) +
                     (misalign ? " misaligned" : ""));
        // Parameter, gradient, then the states; AdamW reads the step last.
        int tensors = 2 + c.states;
        std::mt19937 rng(5);
        std::uniform_real_distribution<float> uniform(-1.f, 1.f);
        std::vector<std::vector<float>> cpu(tensors, std::vector<float>(n));
        for (auto &t : cpu)
          for (float &v : t)
            v = uniform(rng);
        for (int s = 0; s < c.states; ++s) // AdamW's second moment >= 0
          if (s == 1)
            for (float &v : cpu[2 + s])
              v = std::fabs(v);
        std::vector<std::vector<float>> gpuHost = cpu;
        std::vector<TensorType> ins, outs;
        for (int t = 0; t < tensors; ++t)
          ins.push_back(f32(n));
        outs.push_back(f32(n));
        for (int s = 0; s < c.states; ++s)
          outs.push_back(f32(n));
        bool adam = c.states == 2;
        if (adam)
          ins.push_back(step);
        std::unique_ptr<Kernel> cpuKernel;
        ASSERT_TRUE(
            createCpuKernel(c.kernel, *c.attrs, ins, outs, cpuKernel).ok());
        DeviceContext ctx;
        std::unique_ptr<GpuKernel> gpuKernel;
        ASSERT_TRUE(
            createGpuKernel(c.kernel, *c.attrs, ins, outs, ctx, gpuKernel)
                .ok() &&
            gpuKernel);
        std::vector<float *> device(tensors);
        for (int t = 0; t < tensors; ++t) {
          float *d = nullptr;
          ASSERT_EQ(cudaMalloc(&d, (n + 1) * sizeof(float)), cudaSuccess);
          device[t] = d + (t == 1 ? misalign : 0);
          cudaMemcpy(device[t], cpu[t].data(), n * sizeof(float),
                     cudaMemcpyHostToDevice);
        }
        int64_t *deviceStep = nullptr;
        ASSERT_EQ(cudaMalloc(&deviceStep, sizeof(int64_t)), cudaSuccess);
        for (int64_t k = 0; k < 3; ++k) {
          cudaMemcpy(deviceStep, &k, sizeof k, cudaMemcpyHostToDevice);
          std::vector<TensorRef> cpuIn, cpuOut, gpuIn, gpuOut;
          for (int t = 0; t < tensors; ++t) {
            cpuIn.push_back({cpu[t].data(), ins[t]});
            gpuIn.push_back({device[t], ins[t]});
          }
          if (adam) {
            cpuIn.push_back({&k, step});
            gpuIn.push_back({deviceStep, step});
          }
          for (int t : {0, 2, 3})
            if (t < tensors) {
              cpuOut.push_back({cpu[t].data(), f32(n)});
              gpuOut.push_back({device[t], f32(n)});
            }
          ASSERT_TRUE(cpuKernel->run(cpuIn, cpuOut).ok());
          ASSERT_TRUE(gpuKernel->run(ctx, gpuIn, gpuOut).ok());
        }
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        for (int t : {0, 2, 3}) {
          if (t >= tensors)
            continue;
          cudaMemcpy(gpuHost[t].data(), device[t], n * sizeof(float),
                     cudaMemcpyDeviceToHost);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_NEAR(gpuHost[t][i], cpu[t][i],
                        1e-5f * std::max(1.f, std::fabs(cpu[t][i])))
                << "tensor " << t << " element " << i;
        }
        for (int t = 0; t < tensors; ++t)
          cudaFree(device[t] - (t == 1 ? misalign : 0));
        cudaFree(deviceStep);
      }
}

namespace {

/// Kernel `name` on `dtype` (f32, bf16 or f16) operands of the given
/// shapes, on the GPU and on the CPU backend (which widens 16-bit operands,
/// runs the f32 kernel and rounds once): the same numbers within `rtol`
/// (products add in another order, or in TF32 where `tf32`; everything
/// else differs by a rounding at most).
/// `v` stored as `dtype` (f32, bf16 or f16) at `to`, and read back.
void encodeAs(DType dtype, float v, uint8_t *to) {
  if (dtype == DType::F32) {
    std::memcpy(to, &v, 4);
    return;
  }
  uint16_t code = dtype == DType::BF16 ? floatToBf16(v) : floatToHalf(v);
  std::memcpy(to, &code, 2);
}
float decodeAs(DType dtype, const uint8_t *from) {
  if (dtype == DType::F32) {
    float v;
    std::memcpy(&v, from, 4);
    return v;
  }
  uint16_t code;
  std::memcpy(&code, from, 2);
  return dtype == DType::BF16 ? bf16ToFloat(code) : halfToFloat(code);
}

void expectTypedMatchesCpu(
    const std::string &name, const AttrMap &attrs, DType dtype,
    const std::vector<Shape> &inputs, const Shape &output, float rtol,
    const std::function<void(size_t, std::vector<float> &)> &edit = {},
    bool fuseEpilogues = true, bool tf32 = true) {
  SCOPED_TRACE(name + " in " + dtypeName(dtype) +
               (fuseEpilogues ? "" : ", epilogue apart") +
               (dtype == DType::F32 && !tf32 ? ", no TF32" : ""));
  bool f32 = dtype == DType::F32;
  size_t width = f32 ? 4 : 2;
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  std::vector<TensorType> inTypes;
  std::vector<std::vector<uint8_t>> host;
  auto encode = [&](float v, uint8_t *to) { encodeAs(dtype, v, to); };
  auto decode = [&](const uint8_t *from) { return decodeAs(dtype, from); };
  for (const Shape &s : inputs) {
    inTypes.push_back({dtype, s});
    std::vector<float> values(numElements(s));
    for (float &v : values)
      v = uniform(rng);
    if (edit)
      edit(host.size(), values);
    host.emplace_back(values.size() * width);
    for (size_t i = 0; i < values.size(); ++i)
      encode(values[i], host.back().data() + i * width);
  }
  TensorType outType{dtype, output};
  int64_t n = numElements(output);
  std::unique_ptr<Kernel> cpu;
  Status made = createCpuKernel(name, attrs, inTypes, {outType}, cpu);
  ASSERT_TRUE(made.ok()) << made.message();
  std::vector<TensorRef> cpuIn;
  for (size_t k = 0; k < host.size(); ++k)
    cpuIn.push_back({host[k].data(), inTypes[k]});
  std::vector<uint8_t> expected(n * width);
  ASSERT_TRUE(cpu->run(cpuIn, {{expected.data(), outType}}).ok());

  std::vector<TensorRef> gpuIn;
  for (size_t k = 0; k < host.size(); ++k) {
    void *d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, host[k].size() + 16), cudaSuccess);
    cudaMemcpy(d, host[k].data(), host[k].size(), cudaMemcpyHostToDevice);
    gpuIn.push_back({d, inTypes[k]});
  }
  void *y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, n * width + 16), cudaSuccess);
  DeviceContext ctx;
  ASSERT_EQ(cublasCreate(&ctx.cublas), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtCreate(&ctx.cublasLt), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudnnCreate(&ctx.cudnn), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudaMalloc(&ctx.workspace, 64 << 20), cudaSuccess);
  ctx.workspaceBytes = 64 << 20;
  ctx.options.fuseEpilogues = fuseEpilogues;
  ctx.options.tf32 = tf32;
  std::unique_ptr<GpuKernel> k;
  Status s = createGpuKernel(name, attrs, inTypes, {outType}, ctx, k);
  // A host fallback would hide a missing GPU kernel.
  ASSERT_TRUE(s.ok() && k) << "no GPU kernel: " << s.message();
  TuneScratch scratch;
  ASSERT_TRUE(k->tune(ctx, gpuIn, {{y, outType}}, scratch).ok());
  // Which implementation tuning chose is what this case checked.
  if (const char *variant = k->variant())
    std::printf("[ chosen   ] %s: %s\n", name.c_str(), variant);
  ASSERT_LE(k->workspaceBytes(), ctx.workspaceBytes);
  ASSERT_TRUE(k->run(ctx, gpuIn, {{y, outType}}).ok());
  std::vector<uint8_t> got(n * width);
  ASSERT_EQ(cudaMemcpy(got.data(), y, n * width, cudaMemcpyDeviceToHost),
            cudaSuccess);
  float worst = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    float e = decode(expected.data() + i * width),
          g = decode(got.data() + i * width);
    if (std::isnan(e)) {
      ASSERT_TRUE(std::isnan(g)) << "element " << i;
      continue;
    }
    worst = std::max(worst, std::fabs(g - e) / (std::fabs(e) + 1.f));
    ASSERT_NEAR(g, e, rtol * std::fabs(e) + rtol) << "element " << i;
  }
  std::printf("[ worst    ] %s: %.2e (relative, of |x| + 1)\n", name.c_str(),
              worst);
  for (TensorRef &r : gpuIn)
    cudaFree(r.data);
  cudaFree(y);
  cudaFree(ctx.workspace);
  cublasLtDestroy(ctx.cublasLt);
  cublasDestroy(ctx.cublas);
  cudnnDestroy(ctx.cudnn);
}

AttrMap attentionAttrs(const strided::View &q, const strided::View &k,
                       const strided::View &v, std::vector<int64_t> perm,
                       double scale, bool nanToZero) {
  AttrMap a;
  const char *names[3] = {"q", "k", "v"};
  const strided::View *views[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    std::string n = names[i];
    a.set(n + "_shape", AttrValue::ofInts(views[i]->shape));
    a.set(n + "_strides", AttrValue::ofInts(views[i]->strides));
    a.set(n + "_offset", AttrValue::ofInts({views[i]->offset}));
  }
  a.set("perm", AttrValue::ofInts(std::move(perm)));
  a.set("scale", AttrValue::ofFloats({scale}));
  a.set("nan_to_zero", AttrValue::ofInts({nanToZero}));
  return a;
}

// graph.attention's fused kernels (f32 with and without TF32, bf16, f16)
// against the CPU's three ops: heads read in place from a fused projection
// with a causal mask and a fully masked row (16-byte loads), unaligned
// views (element loads), keys and values shared by every head, BERT's
// padding mask with aligned and with odd rows, one query; stated causal
// over a padding mask and with none; each head size, aligned and not,
// neither length a multiple of the kernels' steps.
TEST(GpuKernels, AttentionMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Precision {
    DType type;
    bool tf32;
    float rtol;
  };
  // f32: TF32 products, or three of them per product where TF32 is off.
  for (auto [t, tf32, rtol] :
       {Precision{DType::F32, true, 5e-3f}, Precision{DType::F32, false, 1e-4f},
        Precision{DType::BF16, true, 2e-2f},
        Precision{DType::F16, true, 2e-2f}}) {
    // 300 queries: f32 takes two tiles of queries a warp; 16- and
    // 128-wide heads whose rows lie 16 bytes apart: the asynchronous
    // 16-bit kernel's other instances.
    for (std::pair<int64_t, int64_t> shape :
         {std::pair<int64_t, int64_t>{80, 64},
          {300, 64},
          {136, 16},
          {136, 128}}) {
      int64_t s = shape.first, d = shape.second, b = 2, h = 2, w = 3 * h * d;
      strided::View q{{b, h, s, d}, {s * w, d, w, 1}, 0};
      strided::View k{{b, h, d, s}, {s * w, d, 1, w}, h * d};
      strided::View v{{b, h, s, d}, {s * w, d, w, 1}, 2 * h * d};
      auto causal = [&](size_t input, std::vector<float> &x) {
        if (input != 3)
          return;
        for (int64_t n = 0; n < b; ++n)
          for (int64_t i = 0; i < s; ++i)
            for (int64_t j = 0; j < s; ++j)
              if (j > i || (n == 1 && i == 5))
                x[(n * s + i) * s + j] = -INFINITY;
      };
      expectTypedMatchesCpu(
          "attention", attentionAttrs(q, k, v, {0, 2, 1, 3}, 0.125, true), t,
          {{b * s, w}, {b * s, w}, {b * s, w}, {b, 1, s, s}}, {b * s, h * d},
          rtol, [&](size_t input, std::vector<float> &x) { causal(input, x); },
          true, tf32);
      // The same mask stated causal (as partc-fuse-attention proves it):
      // kernels skip the keys past each query; the CPU reads the bias.
      AttrMap stated = attentionAttrs(q, k, v, {0, 2, 1, 3}, 0.125, true);
      stated.set("causal", AttrValue::ofInts({1}));
      expectTypedMatchesCpu(
          "attention", stated, t,
          {{b * s, w}, {b * s, w}, {b * s, w}, {b, 1, s, s}}, {b * s, h * d},
          rtol, [&](size_t input, std::vector<float> &x) { causal(input, x); },
          true, tf32);
      // Stated causal over a padding mask per key (GPT-2's mask once
      // partc-fuse-attention drops its triangle), and with no mask: the
      // kernels hide the keys past each query themselves.
      auto padding = [&](size_t input, std::vector<float> &x) {
        if (input == 3)
          for (int64_t j = s - 7; j < s; ++j)
            x[s + j] = -INFINITY;
      };
      expectTypedMatchesCpu("attention", stated, t,
                            {{b * s, w}, {b * s, w}, {b * s, w}, {b, 1, 1, s}},
                            {b * s, h * d}, rtol, padding, true, tf32);
      expectTypedMatchesCpu("attention", stated, t,
                            {{b * s, w}, {b * s, w}, {b * s, w}},
                            {b * s, h * d}, rtol, {}, true, tf32);
    }
    {
      strided::View q{{2, 3, 37, 16}, {3 * 37 * 17, 37 * 17, 17, 1}, 1};
      strided::View k{{2, 3, 16, 50}, {2400, 800, 1, 16}, 0};
      strided::View v{{2, 3, 50, 16}, {2400, 800, 16, 1}, 0};
      AttrMap a = attentionAttrs(q, k, v, {0, 1, 2, 3}, 0.25, false);
      // q at an odd offset: element loads; a bias per query, broadcast
      // along the keys, read element by element.
      expectTypedMatchesCpu(
          "attention", a, t,
          {{2 * 3 * 37 * 17 + 1}, {2400 * 2}, {2400 * 2}, {2, 1, 37, 1}},
          {2, 3, 37, 16}, rtol, {}, true, tf32);
    }
    {
      strided::View q{{1, 4, 70, 128}, {4 * 70 * 128, 70 * 128, 128, 1}, 0};
      strided::View k{{1, 1, 128, 70}, {70 * 128, 70 * 128, 1, 128}, 0};
      strided::View v{{1, 1, 70, 128}, {70 * 128, 70 * 128, 128, 1}, 0};
      auto padding = [](size_t input, std::vector<float> &x) {
        if (input == 3)
          for (int64_t j = 60; j < 70; ++j)
            x[j] = -INFINITY;
      };
      expectTypedMatchesCpu(
          "attention", attentionAttrs(q, k, v, {0, 1, 2, 3}, 0.088, true), t,
          {{1, 4, 70, 128}, {1, 1, 70, 128}, {1, 1, 70, 128}, {1, 1, 1, 70}},
          {1, 4, 70, 128}, rtol, padding, true, tf32);
    }
    {
      // BERT's layout and padding mask, long enough for cuDNN's fused
      // attention to be timed beside partc's kernel.
      int64_t b = 2, h = 4, s = 256, d = 64, w = h * d;
      strided::View q{{b, h, s, d}, {s * w, d, w, 1}, 0};
      strided::View k{{b, h, d, s}, {s * w, d, 1, w}, 0};
      strided::View v{{b, h, s, d}, {s * w, d, w, 1}, 0};
      auto padding = [&](size_t input, std::vector<float> &x) {
        if (input == 3)
          for (int64_t j = 200; j < s; ++j)
            x[s + j] = -INFINITY;
      };
      expectTypedMatchesCpu(
          "attention", attentionAttrs(q, k, v, {0, 2, 1, 3}, 0.125, true), t,
          {{b * s, w}, {b * s, w}, {b * s, w}, {b, 1, 1, s}}, {b * s, w}, rtol,
          padding, true, tf32);
    }
    {
      // The same with rows an odd number of elements apart: element
      // loads, and the bias read per row although it is the same for
      // every query (f32: 64 keys a step, two tiles a warp).
      int64_t b = 2, h = 4, s = 256, d = 64, w = h * d + 1;
      strided::View q{{b, h, s, d}, {s * w, d, w, 1}, 0};
      strided::View k{{b, h, d, s}, {s * w, d, 1, w}, 0};
      strided::View v{{b, h, s, d}, {s * w, d, w, 1}, 0};
      auto padding = [&](size_t input, std::vector<float> &x) {
        if (input == 3)
          for (int64_t j = 100; j < s; ++j)
            x[j] = -INFINITY;
      };
      expectTypedMatchesCpu(
          "attention", attentionAttrs(q, k, v, {0, 2, 1, 3}, 0.125, true), t,
          {{b * s, w}, {b * s, w}, {b * s, w}, {b, 1, 1, s}}, {b * s, h * d},
          rtol, padding, true, tf32);
    }
    {
      strided::View q{{3, 1, 32}, {32, 32, 1}, 0};
      strided::View k{{3, 32, 200}, {6400, 1, 32}, 0};
      strided::View v{{3, 200, 32}, {6400, 32, 1}, 0};
      expectTypedMatchesCpu("attention",
                            attentionAttrs(q, k, v, {0, 1, 2}, 0.17, false), t,
                            {{3, 1, 32}, {3, 200, 32}, {3, 200, 32}},
                            {3, 1, 32}, rtol, {}, true, tf32);
    }
  }
}

// f32 products with Gelu's tanh form after the bias (strict fp32): through
// cuBLASLt's GELU epilogue where tuning picks it, and with the epilogue as
// separate passes (bias, then Gelu).
TEST(GpuKernels, ProductsWithTanhGeluMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  AttrMap matmul, gemm;
  matmul.set("activation", AttrValue::ofString("gelu_tanh"));
  gemm = matmul;
  gemm.set("trans_a", AttrValue::ofInts({0}));
  gemm.set("trans_b", AttrValue::ofInts({1}));
  gemm.set("alpha", AttrValue::ofFloats({1.0}));
  gemm.set("beta", AttrValue::ofFloats({1.0}));
  struct Case {
    const char *name;
    const AttrMap *attrs;
    std::vector<Shape> inputs;
    Shape output;
  } cases[] = {{"matmul", &matmul, {{64, 96}, {96, 80}, {80}}, {64, 80}},
               {"gemm", &gemm, {{8, 40}, {24, 40}, {24}}, {8, 24}}};
  for (const Case &c : cases)
    for (bool fused : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + (fused ? "" : ", epilogue apart"));
      std::mt19937 rng(5);
      std::uniform_real_distribution<float> uniform(-1.f, 1.f);
      std::vector<TensorType> types;
      std::vector<std::vector<float>> host;
      for (const Shape &shape : c.inputs) {
        types.push_back({DType::F32, shape});
        host.emplace_back(numElements(shape));
        for (float &v : host.back())
          v = uniform(rng);
      }
      TensorType outType{DType::F32, c.output};
      int64_t n = outType.numElements();
      std::unique_ptr<Kernel> cpu;
      ASSERT_TRUE(
          createCpuKernel(c.name, *c.attrs, types, {outType}, cpu).ok());
      std::vector<TensorRef> cpuIn, gpuIn;
      for (size_t i = 0; i < host.size(); ++i)
        cpuIn.push_back({host[i].data(), types[i]});
      std::vector<float> expected(n), got(n);
      ASSERT_TRUE(cpu->run(cpuIn, {{expected.data(), outType}}).ok());
      DeviceContext ctx;
      ctx.options.tf32 = false;
      ctx.options.fuseEpilogues = fused;
      ASSERT_EQ(cublasCreate(&ctx.cublas), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cublasLtCreate(&ctx.cublasLt), CUBLAS_STATUS_SUCCESS);
      ASSERT_EQ(cudaMalloc(&ctx.workspace, 64 << 20), cudaSuccess);
      ctx.workspaceBytes = 64 << 20;
      for (size_t i = 0; i < host.size(); ++i) {
        void *d = nullptr;
        ASSERT_EQ(cudaMalloc(&d, types[i].byteSize()), cudaSuccess);
        cudaMemcpy(d, host[i].data(), types[i].byteSize(),
                   cudaMemcpyHostToDevice);
        gpuIn.push_back({d, types[i]});
      }
      void *y = nullptr;
      ASSERT_EQ(cudaMalloc(&y, outType.byteSize()), cudaSuccess);
      std::unique_ptr<GpuKernel> k;
      Status made = createGpuKernel(c.name, *c.attrs, types, {outType}, ctx, k);
      ASSERT_TRUE(made.ok() && k) << made.message();
      TuneScratch scratch;
      ASSERT_TRUE(k->tune(ctx, gpuIn, {{y, outType}}, scratch).ok());
      ASSERT_TRUE(k->run(ctx, gpuIn, {{y, outType}}).ok());
      ASSERT_EQ(
          cudaMemcpy(got.data(), y, outType.byteSize(), cudaMemcpyDeviceToHost),
          cudaSuccess);
      // cuBLASLt does not say how it computes tanh: allow 1e-4, and print
      // what it reached.
      float worst = 0.f;
      for (int64_t i = 0; i < n; ++i) {
        float diff = std::fabs(got[i] - expected[i]) /
                     std::max(1.f, std::fabs(expected[i]));
        worst = std::max(worst, diff);
        ASSERT_LE(diff, 1e-4f)
            << "element " << i << ": " << got[i] << " against " << expected[i];
      }
      std::printf("  %s%s: largest difference %.2e (%s)\n", c.name,
                  fused ? "" : " apart", worst,
                  k->variant() ? k->variant() : "");
      for (TensorRef &r : gpuIn)
        cudaFree(r.data);
      cudaFree(y);
      cudaFree(ctx.workspace);
      cublasLtDestroy(ctx.cublasLt);
      cublasDestroy(ctx.cublas);
    }
}

// Pooling's 2-D kernel (16 bytes of channels a thread) in every type
// against the CPU: Inception v3's stem max pool (3x3, stride 2, no
// padding), its branch average pools (3x3, stride 1, padding counted) and
// one that leaves the padding out; ceil_mode's window past the end; rows
// of a channel count the kernel does not take (the general kernels).
TEST(GpuKernels, PoolingIn2dMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    bool isMax;
    std::vector<int64_t> strides, pads;
    int includePad, ceil;
    Shape x, y;
  } cases[] = {
      {true, {2, 2}, {0, 0, 0, 0}, 0, 0, {2, 11, 11, 16}, {2, 5, 5, 16}},
      {false, {1, 1}, {1, 1, 1, 1}, 1, 0, {2, 7, 7, 24}, {2, 7, 7, 24}},
      {false, {1, 1}, {1, 1, 1, 1}, 0, 0, {2, 7, 7, 8}, {2, 7, 7, 8}},
      {false, {2, 2}, {0, 0, 0, 0}, 0, 1, {1, 8, 8, 16}, {1, 4, 4, 16}},
      {true, {2, 2}, {1, 1, 1, 1}, 0, 0, {2, 9, 9, 12}, {2, 5, 5, 12}},
  };
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (const Case &c : cases) {
      SCOPED_TRACE(shapeToString(c.x) + (c.isMax ? " max" : " average"));
      AttrMap pool = windowAttrs(c.strides, c.pads);
      pool.set("kernel_shape", AttrValue::ofInts({3, 3}));
      pool.set("ceil_mode", AttrValue::ofInts({c.ceil}));
      pool.set("count_include_pad", AttrValue::ofInts({c.includePad}));
      pool.set("channels_last", AttrValue::ofInts({1}));
      expectTypedMatchesCpu(c.isMax ? "max_pool" : "avg_pool", pool, t, {c.x},
                            c.y, t == DType::F32 ? 1e-5f : 1e-2f);
    }
}

TEST(GpuKernels, SixteenBitKernelsMatchCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  AttrMap none, relu, softmaxLast, softmaxFirst, norm, gemm, chain, gelu;
  relu.set("activation", AttrValue::ofString("relu"));
  softmaxLast.set("axis", AttrValue::ofInts({1}));
  softmaxLast.set("nan_to_zero", AttrValue::ofInts({0}));
  softmaxFirst.set("axis", AttrValue::ofInts({0}));
  softmaxFirst.set("nan_to_zero", AttrValue::ofInts({0}));
  norm.set("axis", AttrValue::ofInts({1}));
  norm.set("epsilon", AttrValue::ofFloats({1e-5}));
  gemm.set("trans_a", AttrValue::ofInts({0}));
  gemm.set("trans_b", AttrValue::ofInts({1}));
  gemm.set("alpha", AttrValue::ofFloats({1.0}));
  gemm.set("beta", AttrValue::ofFloats({1.0}));
  chain.set("steps", AttrValue::ofString("mul,tanh,div,add"));
  chain.set("args", AttrValue::ofInts({0, 1, 2, -2, 0, -1, -3}));
  gelu.set("approximate", AttrValue::ofString("none"));
  AttrMap geluTanh, gemmGelu = gemm;
  geluTanh.set("activation", AttrValue::ofString("gelu_tanh"));
  gemmGelu.set("activation", AttrValue::ofString("gelu_tanh"));
  for (DType t : {DType::BF16, DType::F16}) {
    // Products: cuBLASLt with its bias and ReLU epilogue, a batch of
    // matrices, Gemm's transposed weight and bias.
    expectTypedMatchesCpu("matmul", relu, t, {{64, 96}, {96, 80}, {80}},
                          {64, 80}, 2e-2f);
    expectTypedMatchesCpu("matmul", none, t, {{4, 16, 32}, {4, 32, 24}},
                          {4, 16, 24}, 2e-2f);
    expectTypedMatchesCpu("gemm", gemm, t, {{8, 40}, {24, 40}, {24}}, {8, 24},
                          2e-2f);
    // Gelu's tanh form after the bias: cuBLASLt's GELU epilogue (when
    // tuning picks it), and the GEMM with the bias and Gelu passes apart.
    for (bool fused : {true, false}) {
      expectTypedMatchesCpu("matmul", geluTanh, t, {{64, 96}, {96, 80}, {80}},
                            {64, 80}, 2e-2f, {}, fused);
      expectTypedMatchesCpu("gemm", gemmGelu, t, {{8, 40}, {24, 40}, {24}},
                            {8, 24}, 2e-2f, {}, fused);
    }
    // Convolutions, channels last: a 3x3 stride-2 one with its bias and
    // ReLU fused (a cuDNN graph), a 1x1 one with a residual.
    AttrMap conv = windowAttrs({2, 2}, {1, 1, 1, 1});
    conv.set("channels_last", AttrValue::ofInts({1}));
    conv.set("activation", AttrValue::ofString("relu"));
    expectTypedMatchesCpu("conv", conv, t, {{2, 9, 9, 8}, {12, 3, 3, 8}, {12}},
                          {2, 5, 5, 12}, 3e-2f);
    AttrMap pointwise = windowAttrs({1, 1}, {0, 0, 0, 0});
    pointwise.set("channels_last", AttrValue::ofInts({1}));
    expectTypedMatchesCpu("conv", pointwise, t,
                          {{2, 6, 6, 16}, {32, 1, 1, 16}, {32}, {2, 6, 6, 32}},
                          {2, 6, 6, 32}, 3e-2f);
    // Pooling channels last: ResNet's 3x3 stride-2 max pool, an average
    // with padding left out of the count.
    for (bool isMax : {true, false}) {
      AttrMap pool = windowAttrs({2, 2}, {1, 1, 1, 1});
      pool.set("kernel_shape", AttrValue::ofInts({3, 3}));
      pool.set("ceil_mode", AttrValue::ofInts({0}));
      pool.set("count_include_pad", AttrValue::ofInts({0}));
      pool.set("channels_last", AttrValue::ofInts({1}));
      for (int64_t c : {int64_t(12), int64_t(6)}) // 4 channels a thread, 1
        expectTypedMatchesCpu(isMax ? "max_pool" : "avg_pool", pool, t,
                              {{2, 9, 9, c}}, {2, 5, 5, c}, 1e-2f);
    }
    // Element-wise: a fused chain with broadcasts at eight elements a
    // thread, at four (rows of 12), at one; lone steps.
    expectTypedMatchesCpu("fused_elementwise", chain, t,
                          {{8, 64}, {1, 64}, {8, 1}}, {8, 64}, 1e-2f);
    expectTypedMatchesCpu("fused_elementwise", chain, t,
                          {{3, 12}, {1, 12}, {3, 1}}, {3, 12}, 1e-2f);
    expectTypedMatchesCpu("fused_elementwise", chain, t,
                          {{7, 9}, {7, 9}, {7, 9}}, {7, 9}, 1e-2f);
    // The same chain on concatenated parts (input 0): eight elements a
    // thread, then one (a part of odd width).
    AttrMap parts = chain;
    parts.set("concat_parts", AttrValue::ofInts({3}));
    expectTypedMatchesCpu("fused_elementwise", parts, t,
                          {{4, 16}, {4, 8}, {4, 40}, {1, 64}, {4, 1}}, {4, 64},
                          1e-2f);
    expectTypedMatchesCpu("fused_elementwise", parts, t,
                          {{4, 16}, {4, 3}, {4, 5}, {1, 24}, {4, 24}}, {4, 24},
                          1e-2f);
    expectTypedMatchesCpu("add", none, t, {{6, 10}, {10}}, {6, 10}, 1e-2f);
    expectTypedMatchesCpu("gelu", gelu, t, {{8, 64}}, {8, 64}, 1e-2f);
    // Softmax in registers (and past 1024), by rows of any length, along
    // the first axis; layer norm by warps and by blocks.
    for (int64_t cols : {int64_t(512), int64_t(1536), int64_t(100)})
      expectTypedMatchesCpu("softmax", softmaxLast, t, {{9, cols}}, {9, cols},
                            1e-2f);
    expectTypedMatchesCpu("softmax", softmaxFirst, t, {{5, 7}}, {5, 7}, 1e-2f);
    // Biases along the row (16-byte loads), one per row, and rows of a
    // length not a multiple of 8 (read three times).
    expectTypedMatchesCpu("softmax", softmaxLast, t, {{6, 256}, {1, 256}},
                          {6, 256}, 1e-2f);
    expectTypedMatchesCpu("softmax", softmaxLast, t, {{6, 256}, {6, 1}},
                          {6, 256}, 1e-2f);
    expectTypedMatchesCpu("softmax", softmaxLast, t, {{6, 20}, {1, 20}},
                          {6, 20}, 1e-2f);
    for (int64_t cols : {int64_t(1024), int64_t(100)})
      expectTypedMatchesCpu("layer_norm", norm, t, {{6, cols}, {cols}, {cols}},
                            {6, cols}, 2e-2f);
    // RMS norm, eight elements a load (a scale per element, one scale,
    // none) and one (rows of 100).
    for (int64_t cols : {int64_t(1024), int64_t(100)})
      expectTypedMatchesCpu("rms_norm", norm, t, {{6, cols}, {cols}}, {6, cols},
                            2e-2f);
    expectTypedMatchesCpu("rms_norm", norm, t, {{6, 64}, {1}}, {6, 64}, 2e-2f);
    expectTypedMatchesCpu("rms_norm", norm, t, {{6, 64}}, {6, 64}, 2e-2f);
    // Reductions, f32 inside: channels-last pools at eight, four and one
    // column a thread, in row chunks; leading, trailing and split axes.
    auto reduceAttrs = [](std::vector<int64_t> axes) {
      AttrMap r;
      r.set("axes", AttrValue::ofInts(axes));
      r.set("keepdims", AttrValue::ofInts({1}));
      return r;
    };
    expectTypedMatchesCpu("reduce_mean", reduceAttrs({1, 2}), t,
                          {{4, 7, 7, 96}}, {4, 1, 1, 96}, 1e-2f);
    expectTypedMatchesCpu("reduce_mean", reduceAttrs({1, 2}), t,
                          {{2, 56, 56, 12}}, {2, 1, 1, 12}, 1e-2f);
    expectTypedMatchesCpu("reduce_max", reduceAttrs({1}), t, {{3, 3000, 7}},
                          {3, 1, 7}, 1e-2f);
    expectTypedMatchesCpu("reduce_sum", reduceAttrs({0}), t, {{300, 40}},
                          {1, 40}, 2e-2f);
    expectTypedMatchesCpu("reduce_mean", reduceAttrs({1}), t, {{64, 100}},
                          {64, 1}, 1e-2f);
    expectTypedMatchesCpu("reduce_min", reduceAttrs({0, 2}), t, {{6, 5, 7}},
                          {1, 5, 1}, 1e-2f);
  }
}

// Layer norm over short rows of whole 16-byte vectors: several rows a warp
// (ConvNeXt's 96 and 192 channels; 200 wants eight lanes a row; 512 f32
// values fill a warp), the last warp partly past the last row; with and
// without the bias; rows of 100 take the warp-a-row kernel.
TEST(GpuKernels, LayerNormOfShortRowsMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  AttrMap norm;
  norm.set("axis", AttrValue::ofInts({1}));
  norm.set("epsilon", AttrValue::ofFloats({1e-5}));
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (int64_t cols : {96, 192, 200, 40, 512, 100}) {
      float rtol = t == DType::F32 ? 1e-4f : 2e-2f;
      expectTypedMatchesCpu("layer_norm", norm, t, {{37, cols}, {cols}, {cols}},
                            {37, cols}, rtol);
      expectTypedMatchesCpu("layer_norm", norm, t, {{37, cols}, {cols}},
                            {37, cols}, rtol);
    }
}

// A convolution with SiLU fused (EfficientNet's): whichever variant tuning
// keeps, SiLU comes after the bias and residual, in its epilogue pass, in
// partc's depthwise kernel or in a pass of its own after a library's fused
// epilogue; with the epilogues fused and apart.
TEST(GpuKernels, ConvolutionWithSiluMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  AttrMap conv = windowAttrs({2, 2}, {1, 1, 1, 1});
  conv.set("channels_last", AttrValue::ofInts({1}));
  conv.set("activation", AttrValue::ofString("silu"));
  AttrMap pointwise = windowAttrs({1, 1}, {0, 0, 0, 0});
  pointwise.set("channels_last", AttrValue::ofInts({1}));
  pointwise.set("activation", AttrValue::ofString("silu"));
  AttrMap depthwise = windowAttrs({1, 1}, {1, 1, 1, 1});
  depthwise.set("channels_last", AttrValue::ofInts({1}));
  depthwise.set("group", AttrValue::ofInts({16}));
  depthwise.set("activation", AttrValue::ofString("silu"));
  for (DType t : {DType::F32, DType::BF16, DType::F16})
    for (bool fused : {true, false}) {
      // f32 convolutions run on TF32 tensor cores.
      float rtol = t == DType::F32 ? 1e-2f : 3e-2f;
      expectTypedMatchesCpu("conv", conv, t,
                            {{2, 9, 9, 8}, {12, 3, 3, 8}, {12}}, {2, 5, 5, 12},
                            rtol, {}, fused);
      expectTypedMatchesCpu(
          "conv", pointwise, t,
          {{2, 6, 6, 16}, {32, 1, 1, 16}, {32}, {2, 6, 6, 32}}, {2, 6, 6, 32},
          rtol, {}, fused);
      expectTypedMatchesCpu("conv", depthwise, t,
                            {{2, 9, 9, 16}, {16, 3, 3, 1}, {16}}, {2, 9, 9, 16},
                            rtol, {}, fused);
    }
}

TEST(GpuKernels, Bf16CastsRoundAsTheCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  // Halfway cases round to even; NaN stays NaN; overflow goes to infinity.
  std::vector<float> values = {1.f,
                               1.00390625f,
                               1.01171875f,
                               -3.4e38f,
                               std::numeric_limits<float>::quiet_NaN(),
                               1e-40f,
                               65504.f,
                               0.1f};
  int64_t n = static_cast<int64_t>(values.size());
  AttrMap attrs;
  TensorType f32{DType::F32, {n}}, bf16{DType::BF16, {n}};
  std::unique_ptr<GpuKernel> to, from;
  DeviceContext ctx;
  ASSERT_TRUE(createGpuKernel("cast", attrs, {f32}, {bf16}, ctx, to).ok() &&
              to);
  ASSERT_TRUE(createGpuKernel("cast", attrs, {bf16}, {f32}, ctx, from).ok() &&
              from);
  void *x = nullptr, *h = nullptr, *back = nullptr;
  ASSERT_EQ(cudaMalloc(&x, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&h, n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&back, n * 4), cudaSuccess);
  cudaMemcpy(x, values.data(), n * 4, cudaMemcpyHostToDevice);
  ASSERT_TRUE(to->run(ctx, {{x, f32}}, {{h, bf16}}).ok());
  ASSERT_TRUE(from->run(ctx, {{h, bf16}}, {{back, f32}}).ok());
  std::vector<uint16_t> bits(n);
  std::vector<float> widened(n);
  cudaMemcpy(bits.data(), h, n * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(widened.data(), back, n * 4, cudaMemcpyDeviceToHost);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(bits[i], floatToBf16(values[i])) << "value " << values[i];
    float expected = bf16ToFloat(floatToBf16(values[i]));
    if (std::isnan(expected))
      EXPECT_TRUE(std::isnan(widened[i]));
    else
      EXPECT_EQ(widened[i], expected);
  }
  cudaFree(x);
  cudaFree(h);
  cudaFree(back);
}

} // namespace

// partc's depthwise convolution (the convolution kernel's "depthwise"
// candidate, which tuning takes only where it is fastest), launched
// directly against the CPU's convolution: strides, padding, dilation, bias,
// residual, ReLU and SiLU, at eight, four and one channel a thread, in f32
// and 16-bit; both forms of the tiled kernel (3, 5 and 7 wide, strides 1
// and 2) and the general one.
/// A convolution's operands on the host (random), the CPU kernel's output
/// for them, and the operands' device copies, freed with it.
struct ConvOnBoth {
  std::vector<std::vector<uint8_t>> host;
  std::vector<void *> device;
  std::vector<uint8_t> expected;
  ~ConvOnBoth() {
    for (void *d : device)
      cudaFree(d);
  }
};

/// A square channels-last 2-D convolution's attributes.
AttrMap channelsLastConvAttrs(int64_t stride, int64_t pad, int64_t dilation,
                              int64_t group, const char *activation) {
  AttrMap attrs = windowAttrs({stride, stride}, {pad, pad, pad, pad});
  attrs.set("dilations", AttrValue::ofInts({dilation, dilation}));
  attrs.set("group", AttrValue::ofInts({group}));
  attrs.set("channels_last", AttrValue::ofInts({1}));
  if (*activation)
    attrs.set("activation", AttrValue::ofString(activation));
  return attrs;
}

::testing::AssertionResult prepareConv(DType dtype,
                                       const std::vector<Shape> &shapes,
                                       const Shape &out, const AttrMap &attrs,
                                       std::mt19937 &rng, ConvOnBoth &r,
                                       int64_t infinityAt = -1) {
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  size_t width = dtype == DType::F32 ? 4 : 2;
  std::vector<TensorType> types;
  for (const Shape &s : shapes) {
    types.push_back({dtype, s});
    r.host.emplace_back(numElements(s) * width);
    for (int64_t i = 0; i < numElements(s); ++i)
      encodeAs(dtype, uniform(rng), r.host.back().data() + width * i);
  }
  if (infinityAt >= 0)
    encodeAs(dtype, std::numeric_limits<float>::infinity(),
             r.host[0].data() + width * infinityAt);
  TensorType outType{dtype, out};
  std::unique_ptr<Kernel> cpu;
  Status made = createCpuKernel("conv", attrs, types, {outType}, cpu);
  if (!made.ok())
    return ::testing::AssertionFailure() << made.message();
  std::vector<TensorRef> cpuIn;
  for (size_t k = 0; k < r.host.size(); ++k)
    cpuIn.push_back({r.host[k].data(), types[k]});
  r.expected.resize(numElements(out) * width);
  if (Status ran = cpu->run(cpuIn, {{r.expected.data(), outType}}); !ran.ok())
    return ::testing::AssertionFailure() << ran.message();
  for (const auto &h : r.host) {
    void *d = nullptr;
    if (cudaMalloc(&d, h.size()) != cudaSuccess ||
        cudaMemcpy(d, h.data(), h.size(), cudaMemcpyHostToDevice) !=
            cudaSuccess)
      return ::testing::AssertionFailure() << "cannot copy an operand";
    r.device.push_back(d);
  }
  return ::testing::AssertionSuccess();
}

/// prepareConv for input x, filter w, a bias where `bias` and a residual
/// of the output's shape where `residual`; input element `infinityAt`
/// infinite where it is not negative.
::testing::AssertionResult prepareConv(DType dtype, const Shape &x,
                                       const Shape &w, bool bias, bool residual,
                                       const Shape &out, const AttrMap &attrs,
                                       std::mt19937 &rng, ConvOnBoth &r,
                                       int64_t infinityAt = -1) {
  std::vector<Shape> shapes{x, w};
  if (bias)
    shapes.push_back({out.back()});
  if (residual)
    shapes.push_back(out);
  return prepareConv(dtype, shapes, out, attrs, rng, r, infinityAt);
}

TEST(GpuKernels, DepthwiseConvolutionMatchesCpu) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  struct Case {
    int c, k, stride, pad, dilation;
    bool bias, residual;
    const char *activation;
  };
  const Case cases[] = {{16, 3, 2, 1, 1, true, false, "relu"},
                        {12, 5, 1, 2, 1, true, true, ""},
                        {5, 3, 1, 2, 2, false, false, "silu"},
                        {24, 7, 1, 3, 1, true, false, ""},
                        // Channel slices of eight groups, the last partial.
                        {72, 3, 1, 1, 1, true, true, "relu"},
                        {200, 7, 2, 3, 1, true, false, "silu"},
                        {40, 5, 2, 2, 1, true, true, "silu"},
                        // ConvNeXt's: form 1 takes 16 groups a slice.
                        {96, 7, 1, 3, 1, true, true, "relu"}};
  std::mt19937 rng(5);
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " c=" + std::to_string(c.c) +
                   " k=" + std::to_string(c.k));
      DepthwiseGeometry g;
      g.n = 2, g.h = 11, g.w = 9, g.c = c.c, g.kh = g.kw = c.k;
      g.strideH = g.strideW = c.stride, g.padTop = g.padLeft = c.pad;
      g.dilationH = g.dilationW = c.dilation;
      int span = (c.k - 1) * c.dilation + 1;
      g.oh = (g.h + 2 * c.pad - span) / c.stride + 1;
      g.ow = (g.w + 2 * c.pad - span) / c.stride + 1;
      Shape ys{g.n, g.oh, g.ow, g.c};
      bool f32 = dtype == DType::F32, bf16 = dtype == DType::BF16;
      size_t width = f32 ? 4 : 2;
      ConvOnBoth conv;
      ASSERT_TRUE(prepareConv(
          dtype, {g.n, g.h, g.w, g.c}, {g.c, g.kh, g.kw, 1}, c.bias, c.residual,
          ys,
          channelsLastConvAttrs(c.stride, c.pad, c.dilation, c.c, c.activation),
          rng, conv));
      const std::vector<void *> &device = conv.device;
      const std::vector<uint8_t> &expected = conv.expected;
      int64_t n = numElements(ys);
      std::vector<uint8_t> got(n * width);
      void *y = nullptr;
      ASSERT_EQ(cudaMalloc(&y, n * width), cudaSuccess);
      unsigned char element = f32    ? FusedParams::F32
                              : bf16 ? FusedParams::BF16
                                     : FusedParams::F16;
      int forms = depthwiseForms(g);
      // Every case's filter is square, 3 to 7 wide, stride 1 or 2.
      EXPECT_EQ(forms, c.dilation == 1 && c.c % 4 == 0 ? 4 : 1);
      for (int form = 0; form < forms; ++form) {
        SCOPED_TRACE("form " + std::to_string(form));
        ASSERT_EQ(cudaMemset(y, 0xff, n * width), cudaSuccess);
        ASSERT_EQ(launchDepthwiseConv(device[0], device[1],
                                      c.bias ? device[2] : nullptr,
                                      c.residual ? device.back() : nullptr, y,
                                      g, std::string(c.activation) == "relu",
                                      std::string(c.activation) == "silu",
                                      element, nullptr, form),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(got.data(), y, n * width, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        float tolerance = f32 ? 1e-5f : 2e-2f;
        for (int64_t i = 0; i < n; ++i) {
          float e = decodeAs(dtype, expected.data() + i * width),
                v = decodeAs(dtype, got.data() + i * width);
          ASSERT_NEAR(v, e, tolerance * (std::fabs(e) + 1.f))
              << "element " << i;
        }
      }
      cudaFree(y);
    }
}

// partc's tensor-core convolution over few input channels (a CNN's stem)
// gives the CPU kernel's numbers: output rows of several segments and of a
// partial one, a second and partial group of output channels, every
// epilogue.
TEST(GpuKernels, FewChannelConvolutionMatchesCpu) {
  struct Case {
    int n, h, w, c, k, kernel, stride, pad;
    bool bias, residual;
    const char *activation;
  };
  const Case cases[] = {{2, 23, 23, 3, 64, 7, 2, 3, true, false, "relu"},
                        {1, 5, 300, 3, 16, 3, 1, 1, true, true, ""},
                        {2, 32, 32, 3, 96, 4, 4, 0, true, false, ""},
                        {1, 17, 40, 4, 8, 5, 1, 2, true, true, "silu"},
                        {2, 9, 70, 1, 24, 3, 2, 1, true, false, "relu"},
                        {1, 12, 12, 2, 40, 3, 2, 0, true, true, "silu"},
                        // ResNet-50's stem on a strip of rows.
                        {1, 20, 224, 3, 64, 7, 2, 3, true, false, "relu"}};
  // An infinite input in the last case: outputs that do not see it stay
  // finite (taps past a filter row read other pixels' inputs, and zero
  // weights must not make NaN of an infinity there).
  const int64_t infinityAt = (10 * 224 + 100) * 3 + 1;
  FewChannelConvGeometry odd;
  odd.n = odd.h = odd.w = odd.oh = odd.ow = odd.kh = odd.kw = 1;
  odd.c = 3, odd.k = 12;
  EXPECT_EQ(fewChannelConvForms(odd), 0); // 12 channels out: not 8s
  odd.k = 8, odd.c = 5;
  EXPECT_EQ(fewChannelConvForms(odd), 0); // 5 channels in
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  std::mt19937 rng(7);
  for (DType dtype : {DType::BF16, DType::F16})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " c=" + std::to_string(c.c) +
                   " k=" + std::to_string(c.k) + " w=" + std::to_string(c.w));
      FewChannelConvGeometry g;
      g.n = c.n, g.h = c.h, g.w = c.w, g.c = c.c, g.k = c.k;
      g.kh = g.kw = c.kernel, g.strideH = g.strideW = c.stride;
      g.padTop = g.padLeft = c.pad;
      g.oh = (g.h + 2 * c.pad - c.kernel) / c.stride + 1;
      g.ow = (g.w + 2 * c.pad - c.kernel) / c.stride + 1;
      ASSERT_GT(fewChannelConvForms(g), 0);
      Shape ys{g.n, g.oh, g.ow, g.k};
      ConvOnBoth conv;
      ASSERT_TRUE(prepareConv(
          dtype, {g.n, g.h, g.w, g.c}, {g.k, g.kh, g.kw, g.c}, c.bias,
          c.residual, ys,
          channelsLastConvAttrs(c.stride, c.pad, 1, 1, c.activation), rng, conv,
          &c == &cases[std::size(cases) - 1] ? infinityAt : -1));
      const std::vector<void *> &device = conv.device;
      int64_t n = numElements(ys);
      std::vector<uint8_t> got(n * 2);
      void *y = nullptr;
      ASSERT_EQ(cudaMalloc(&y, n * 2), cudaSuccess);
      // Form 1 where stride times channels is even.
      int forms = fewChannelConvForms(g);
      EXPECT_EQ(forms, c.stride * c.c % 2 ? 1 : 2);
      for (int form = 0; form < forms; ++form) {
        SCOPED_TRACE("form " + std::to_string(form));
        ASSERT_EQ(cudaMemset(y, 0xff, n * 2), cudaSuccess);
        ASSERT_EQ(launchFewChannelConv(device[0], device[1],
                                       c.bias ? device[2] : nullptr,
                                       c.residual ? device.back() : nullptr, y,
                                       g, std::string(c.activation) == "relu",
                                       std::string(c.activation) == "silu",
                                       dtype == DType::BF16 ? FusedParams::BF16
                                                            : FusedParams::F16,
                                       nullptr, form),
                  cudaSuccess);
        ASSERT_EQ(cudaMemcpy(got.data(), y, n * 2, cudaMemcpyDeviceToHost),
                  cudaSuccess);
        for (int64_t i = 0; i < n; ++i) {
          float e = decodeAs(dtype, conv.expected.data() + i * 2),
                v = decodeAs(dtype, got.data() + i * 2);
          if (!std::isfinite(e)) {
            ASSERT_FALSE(std::isfinite(v)) << "element " << i;
            continue;
          }
          ASSERT_NEAR(v, e, 2e-2f * (std::fabs(e) + 1.f)) << "element " << i;
        }
      }
      cudaFree(y);
    }
}

// Memset nodes of a captured graph become kernel nodes that write the same
// bytes; 2-D fills, and fills too large to be worth it, stay memsets.
TEST(GpuKernels, GraphMemsetsBecomeFillKernels) {
  if (CudaExecutor::deviceCount() == 0)
    GTEST_SKIP() << "no GPU";
  constexpr size_t kBytes = 4096, kLarge = size_t(2) << 20;
  unsigned char *buffer = nullptr, *large = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&large, kLarge), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaMemset(buffer, 0xee, kBytes), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed),
            cudaSuccess);
  // Whole words, then bytes at an odd offset over them (order matters),
  // then a 2-D fill of two 16-byte rows 64 bytes apart.
  ASSERT_EQ(cudaMemsetAsync(buffer, 0x11, 1024, stream), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buffer + 9, 0x22, 5, stream), cudaSuccess);
  ASSERT_EQ(cudaMemset2DAsync(buffer + 2048, 64, 0x33, 16, 2, stream),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(large, 0x44, kLarge, stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  Status s = fillWithKernels(graph);
  ASSERT_TRUE(s.ok()) << s.message();
  size_t count = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &count), cudaSuccess);
  std::vector<cudaGraphNode_t> nodes(count);
  ASSERT_EQ(cudaGraphGetNodes(graph, nodes.data(), &count), cudaSuccess);
  int kernels = 0, memsets = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    ASSERT_EQ(cudaGraphNodeGetType(node, &type), cudaSuccess);
    kernels += type == cudaGraphNodeTypeKernel;
    memsets += type == cudaGraphNodeTypeMemset;
  }
  EXPECT_EQ(kernels, 2);
  EXPECT_EQ(memsets, 2);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  std::vector<unsigned char> host(kBytes);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), buffer, kBytes, cudaMemcpyDeviceToHost,
                            stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  for (size_t i = 0; i < kBytes; ++i) {
    unsigned char want = i >= 9 && i < 14 ? 0x22
                         : i < 1024       ? 0x11
                         : i >= 2048 && i < 2048 + 128 && (i - 2048) % 64 < 16
                             ? 0x33
                             : 0xee;
    ASSERT_EQ(host[i], want) << "byte " << i;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(buffer);
  cudaFree(large);
}
