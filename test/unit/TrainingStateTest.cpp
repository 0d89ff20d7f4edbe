//===- TrainingStateTest.cpp - State in plans and the CPU executor --------===//
#include "TestPlans.h"
#include "runtime/Executor.h"
#include "runtime/io/Dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

using namespace partc::runtime;
using namespace partc::runtime::testing;

namespace {

BufferRef state(uint64_t offset, Shape shape, DType t = DType::F32) {
  return BufferRef{MemorySpace::State, offset, TensorType{t, std::move(shape)}};
}

AttrMap sgdAttrs(double lr) {
  AttrMap a;
  a.set("lr", AttrValue::ofFloats({lr}));
  a.set("momentum", AttrValue::ofFloats({0}));
  a.set("weight_decay", AttrValue::ofFloats({0}));
  return a;
}

/// loss = sum-free toy step: y = p * x (stored), then p -= lr * x (the
/// gradient of sum(p * x) is x). p starts at the weights' {1, 2, 3, 4}.
Plan sgdPlan(std::vector<float> &weights) {
  Plan p;
  p.inputs = {{"x", {DType::F32, {4}}}};
  p.outputs = {{"y", {DType::F32, {4}}}};
  weights = {1, 2, 3, 4};
  p.weightData = reinterpret_cast<const uint8_t *>(weights.data());
  p.weightBytes = weights.size() * sizeof(float);
  StateDecl param;
  param.name = "p";
  param.type = {DType::F32, {4}};
  param.role = "parameter";
  param.zeroInit = false;
  p.states = {param};
  p.devices.resize(1);
  p.devices[0].arenaBytes = 32;
  p.devices[0].stateBytes = 16;
  p.devices[0].instructions = {
      io(OpCode::LoadInput, 0, arena(0, {4})),
      kernel("mul", {state(0, {4}), arena(0, {4})}, {arena(16, {4})}),
      io(OpCode::StoreOutput, 0, arena(16, {4})),
      kernel("sgd_update", {state(0, {4}), arena(0, {4})}, {state(0, {4})},
             sgdAttrs(0.5))};
  return p;
}

TEST(TrainingState, CpuExecutorUpdatesStateInPlaceAcrossRuns) {
  std::vector<float> weights;
  Plan plan = sgdPlan(weights);
  ASSERT_TRUE(verifyPlan(plan).ok()) << verifyPlan(plan).message();
  std::unique_ptr<Executor> exec;
  ASSERT_TRUE(createExecutor(plan, {}, exec).ok());
  float x[4] = {1, 1, 2, 2}, y[4];
  std::vector<TensorRef> in{{x, {DType::F32, {4}}}},
      out{{y, {DType::F32, {4}}}};
  ASSERT_TRUE(exec->run(in, out).ok());
  EXPECT_FLOAT_EQ(y[3], 8); // the initial p
  ASSERT_TRUE(exec->run(in, out).ok());
  EXPECT_FLOAT_EQ(y[3], (4 - 0.5f * 2) * 2); // after one step
  float p[4];
  ASSERT_TRUE(exec->readState(0, p).ok());
  EXPECT_FLOAT_EQ(p[0], 1 - 2 * 0.5f);
  float reset[4] = {9, 9, 9, 9};
  ASSERT_TRUE(exec->writeState(0, reset).ok());
  ASSERT_TRUE(exec->run(in, out).ok());
  EXPECT_FLOAT_EQ(y[0], 9);
  // The plan's weights, from which the state started, are untouched.
  EXPECT_FLOAT_EQ(weights[0], 1);
}

TEST(TrainingState, RoundTripsThroughThePlanFile) {
  std::vector<float> weights;
  Plan plan = sgdPlan(weights);
  std::string path = ::testing::TempDir() + "state.plan";
  ASSERT_TRUE(writePlanFile(path, plan).ok());
  Plan read;
  Status s = readPlanFile(path, read);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(read.states.size(), 1u);
  EXPECT_EQ(read.states[0].name, "p");
  EXPECT_EQ(read.states[0].role, "parameter");
  EXPECT_FALSE(read.states[0].zeroInit);
  EXPECT_EQ(read.devices[0].stateBytes, 16u);
  EXPECT_EQ(read.devices[0].instructions[3].outputs[0].space,
            MemorySpace::State);
  std::remove(path.c_str());
}

TEST(TrainingState, RejectsReadAfterUpdate) {
  std::vector<float> weights;
  Plan plan = sgdPlan(weights);
  // Reading p after the step would see the next step's value.
  plan.devices[0].instructions.push_back(
      kernel("relu", {state(0, {4})}, {arena(16, {4})}));
  Status s = verifyPlan(plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("every read of a state must come before its "
                             "update"),
            std::string::npos)
      << s.message();
}

TEST(TrainingState, RejectsSecondUpdateAndStateOutsideItsRegion) {
  std::vector<float> weights;
  Plan plan = sgdPlan(weights);
  plan.devices[0].instructions.push_back(plan.devices[0].instructions[3]);
  EXPECT_FALSE(verifyPlan(plan).ok());
  plan = sgdPlan(weights);
  plan.devices[0].stateBytes = 8;
  Status s = verifyPlan(plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("state 'p' lies outside device 0's state"),
            std::string::npos)
      << s.message();
  plan = sgdPlan(weights);
  plan.states[0].initOffset = 8; // 16 bytes from offset 8 of 16
  EXPECT_FALSE(verifyPlan(plan).ok());
}

TEST(TrainingState, OnlyKernelsWriteState) {
  std::vector<float> weights;
  Plan plan = sgdPlan(weights);
  plan.inputs.push_back({"z", {DType::F32, {4}}});
  plan.devices[0].instructions.insert(plan.devices[0].instructions.begin(),
                                      io(OpCode::LoadInput, 1, state(0, {4})));
  Status s = verifyPlan(plan);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("writes state; only kernels may"),
            std::string::npos)
      << s.message();
}

} // namespace

// --shuffle's order: a permutation, the same for the same seed and epoch,
// another for another epoch or seed.
TEST(TrainingData, ShufflesEachEpochReproducibly) {
  std::vector<int64_t> a = samplePermutation(1000, 7, 0);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_EQ(a, samplePermutation(1000, 7, 0));
  EXPECT_NE(a, samplePermutation(1000, 7, 1));
  EXPECT_NE(a, samplePermutation(1000, 8, 0));
  EXPECT_EQ(samplePermutation(1, 7, 0), std::vector<int64_t>{0});
  EXPECT_TRUE(samplePermutation(0, 7, 0).empty());
}
