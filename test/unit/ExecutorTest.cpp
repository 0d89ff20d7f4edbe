//===- ExecutorTest.cpp - CPU executor with real transfers ----------------===//
#include "TestPlans.h"

#include "runtime/cpu/CpuExecutor.h"

#include <chrono>
#include <cmath>
#include <gtest/gtest.h>

using namespace partc::runtime;
using namespace partc::runtime::testing;

namespace {

TEST(CpuExecutor, RunsTwoDevicesWithTransfer) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  std::unique_ptr<CpuExecutor> exec;
  ASSERT_TRUE(CpuExecutor::create(plan, exec).ok());
  exec->poisonArenas(0xFF);
  std::vector<float> x = {-1, 2, -3, 4}, z(4);
  for (int rep = 0; rep < 3; ++rep) {
    Status s = exec->run({{x.data(), plan.inputs[0].type}},
                         {{z.data(), plan.outputs[0].type}});
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(z, (std::vector<float>{10, 22, 30, 44}));
  }
}

TEST(CpuExecutor, AllReduceAveragesEveryDevice) {
  for (int devices : {2, 3, 4}) {
    Plan plan = allReducePlan(devices);
    ASSERT_TRUE(verifyPlan(plan).ok()) << verifyPlan(plan).message();
    std::unique_ptr<CpuExecutor> exec;
    ASSERT_TRUE(CpuExecutor::create(plan, exec).ok());
    std::vector<float> x, want(4, 0.0f), z(4);
    for (int d = 0; d < devices; ++d)
      for (int j = 0; j < 4; ++j)
        x.push_back(float(d * 4 + j) * (j == 1 ? -1.0f : 1.0f));
    // Summed in device order, then divided, as the plan defines it.
    for (int j = 0; j < 4; ++j) {
      float sum = std::max(x[j], 0.0f);
      for (int d = 1; d < devices; ++d)
        sum += std::max(x[d * 4 + j], 0.0f);
      want[j] = sum / float(devices);
    }
    for (int rep = 0; rep < 3; ++rep) {
      Status s = exec->run({{x.data(), plan.inputs[0].type}},
                           {{z.data(), plan.outputs[0].type}});
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(z, want) << devices << " devices";
    }
  }
}

TEST(CpuExecutor, KernelFailureBeforeAllReduceAbortsTheGroup) {
  Plan plan = allReducePlan(2);
  // Device 1 fails before the collective; device 0 must not wait forever.
  plan.inputs[0].type.dtype = DType::I64;
  for (DeviceProgram &dev : plan.devices)
    dev.instructions[0].outputs[0].type.dtype = DType::I64;
  plan.devices[1].instructions[1] = kernel(
      "gather", {arena(32, {4}), arena(0, {4}, DType::I64)}, {arena(16, {4})});
  plan.devices[1].instructions[1].attrs.set("axis", AttrValue::ofInts({0}));
  plan.devices[0].instructions[1] =
      kernel("cast", {arena(0, {4}, DType::I64)}, {arena(16, {4})});
  ASSERT_TRUE(verifyPlan(plan).ok()) << verifyPlan(plan).message();
  std::unique_ptr<CpuExecutor> exec;
  ASSERT_TRUE(CpuExecutor::create(plan, exec).ok());
  std::vector<int64_t> x = {0, 1, 2, 3, 0, 9, 1, 2};
  std::vector<float> z(4);
  Status s = exec->run({{x.data(), plan.inputs[0].type}},
                       {{z.data(), plan.outputs[0].type}});
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("device 1"), std::string::npos) << s.message();
}

/// Runs `plan` once on the CPU with `failure`, returning the status and
/// how long the run took.
Status runWithFailure(const Plan &plan, const FailureOptions &failure,
                      int runs = 1, double *seconds = nullptr) {
  std::unique_ptr<CpuExecutor> exec;
  PARTC_RETURN_IF_ERROR(CpuExecutor::create(plan, exec, failure));
  std::vector<float> x(static_cast<size_t>(plan.inputs[0].type.numElements()),
                       1.0f),
      z(static_cast<size_t>(plan.outputs[0].type.numElements()));
  auto start = std::chrono::steady_clock::now();
  Status s;
  for (int r = 0; r < runs && s.ok(); ++r)
    s = exec->run({{x.data(), plan.inputs[0].type}},
                  {{z.data(), plan.outputs[0].type}});
  if (seconds)
    *seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  return s;
}

TEST(CpuExecutor, InjectedErrorBeforeAllReduceNamesTheDevice) {
  FailureOptions failure;
  failure.fault = {FaultInjection::Kind::Error, 1, 2};
  // The fault strikes in the second run only.
  Status s = runWithFailure(allReducePlan(2), failure, 1);
  EXPECT_TRUE(s.ok()) << s.message();
  s = runWithFailure(allReducePlan(2), failure, 2);
  EXPECT_NE(s.message().find("device 1 instruction 2 (all_reduce group 0)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("injected fault"), std::string::npos);
}

TEST(CpuExecutor, InjectedHangBeforeAllReduceTimesOutNamingTheDevice) {
  FailureOptions failure;
  failure.stepTimeoutSeconds = 0.3;
  failure.fault = {FaultInjection::Kind::Hang, 1, 1};
  double seconds = 0;
  Status s = runWithFailure(allReducePlan(3), failure, 1, &seconds);
  EXPECT_NE(s.message().find("run 1 did not finish within 0.3 s"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("device 1 has not reached instruction 2 "
                             "(all_reduce group 0), which device 0 waits for"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("device 2 last reached instruction 2"),
            std::string::npos)
      << s.message();
  EXPECT_LT(seconds, 10.0);
}

TEST(CpuExecutor, InjectedHangBeforeReceiveNamesTheSender) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  FailureOptions failure;
  failure.stepTimeoutSeconds = 0.2;
  // Device 1 stops before its receive; device 0 waits for it to consume.
  failure.fault = {FaultInjection::Kind::Hang, 1, 1};
  Status s = runWithFailure(plan, failure);
  EXPECT_NE(s.message().find("device 1 has not reached instruction 0 (recv"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("which device 0 waits for"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("device 1 had not reached its first exchange"),
            std::string::npos)
      << s.message();
}

TEST(CpuExecutor, RefusesFaultsItCannotCarryOut) {
  FailureOptions failure;
  failure.fault = {FaultInjection::Kind::Error, 2, 1};
  Status s = runWithFailure(allReducePlan(2), failure);
  EXPECT_NE(s.message().find("names device 2 but the plan has 2"),
            std::string::npos)
      << s.message();
  // A hang with nothing to end it would hang the test.
  failure.fault = {FaultInjection::Kind::Hang, 0, 1};
  s = runWithFailure(allReducePlan(2), failure);
  EXPECT_NE(s.message().find("give --step-timeout"), std::string::npos)
      << s.message();
}

TEST(CpuExecutor, StepTimeoutLeavesHealthyRunsAlone) {
  FailureOptions failure;
  failure.stepTimeoutSeconds = 30;
  Status s = runWithFailure(allReducePlan(4), failure, 3);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(CpuExecutor, MissingTransferShowsAsWrongAnswer) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  // Device 1 reads a buffer no one wrote: the receive targets another slot.
  plan.devices[1].instructions[0].outputs[0].offset = 16;
  plan.devices[1].instructions[1].outputs[0].offset = 16;
  plan.devices[1].arenaBytes = 48;
  plan.devices[1].instructions[1].inputs[0].offset = 32;
  ASSERT_TRUE(verifyPlan(plan).ok());
  std::unique_ptr<CpuExecutor> exec;
  ASSERT_TRUE(CpuExecutor::create(plan, exec).ok());
  exec->poisonArenas(0xFF);
  std::vector<float> x = {1, 2, 3, 4}, z(4);
  ASSERT_TRUE(exec->run({{x.data(), plan.inputs[0].type}},
                        {{z.data(), plan.outputs[0].type}})
                  .ok());
  EXPECT_TRUE(std::isnan(z[0]));
}

TEST(CpuExecutor, RejectsUnknownKernelWithLocation) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.devices[0].instructions[1].kernel = "frobnicate";
  plan.devices[0].instructions[1].location = "my_node";
  std::unique_ptr<CpuExecutor> exec;
  Status s = CpuExecutor::create(plan, exec);
  EXPECT_NE(s.message().find("my_node"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("device 0"), std::string::npos) << s.message();
}

TEST(CpuExecutor, KernelFailureAbortsOtherDevices) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  // A gather with an out-of-range index fails at run time on device 0
  // before its send; device 1 must not hang waiting.
  plan.inputs[0].type = {DType::I64, {4}};
  plan.devices[0].instructions[0].outputs[0].type.dtype = DType::I64;
  plan.devices[0].instructions[1] =
      kernel("gather",
             {BufferRef{MemorySpace::Weight, 0, {DType::F32, {4}}},
              arena(0, {4}, DType::I64)},
             {arena(16, {4})});
  plan.devices[0].instructions[1].attrs.set("axis", AttrValue::ofInts({0}));
  plan.devices[0].arenaBytes = 64;
  ASSERT_TRUE(verifyPlan(plan).ok()) << verifyPlan(plan).message();
  std::unique_ptr<CpuExecutor> exec;
  ASSERT_TRUE(CpuExecutor::create(plan, exec).ok());
  std::vector<int64_t> idx = {0, 1, 7, 2};
  std::vector<float> z(4);
  Status s = exec->run({{idx.data(), plan.inputs[0].type}},
                       {{z.data(), plan.outputs[0].type}});
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.message();
}

TEST(Executor, CreatesTheBackendItIsAskedFor) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  std::unique_ptr<Executor> exec;
  ExecutorOptions options;
  ASSERT_TRUE(createExecutor(plan, options, exec).ok());
  std::vector<float> x = {-1, 2, -3, 4}, z(4);
  TensorType t{DType::F32, {4}};
  ASSERT_TRUE(exec->run({{x.data(), t}}, {{z.data(), t}}).ok());
  EXPECT_EQ(z, (std::vector<float>{10, 22, 30, 44}));
  EXPECT_FALSE(exec->canStream());
  EXPECT_FALSE(exec->runStream({{x.data(), t}}, {{z.data(), t}}, 2).ok());
  options.backend = "tpu";
  Status s = createExecutor(plan, options, exec);
  EXPECT_NE(s.message().find("backend 'tpu' is not available in this build"),
            std::string::npos)
      << s.message();
}

} // namespace
