//===- PlanFileTest.cpp - Plan writer, reader and verifier ----------------===//
#include "TestPlans.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

using namespace partc::runtime;
using namespace partc::runtime::testing;

namespace {

std::string tempPath(const char *name) {
  return ::testing::TempDir() + "/" + name;
}

std::vector<char> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeBytes(const std::string &path, const std::vector<char> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), bytes.size());
}

TEST(PlanFile, RoundTripPreservesEverything) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.metadata["strategy"] = "pipeline";
  plan.devices[0].instructions[1].attrs.set("alpha",
                                            AttrValue::ofFloats({0.5}));
  plan.devices[0].instructions[1].location = "node/relu";
  plan.devices[1].instructions[1].stream = 2;
  std::string path = tempPath("roundtrip.plan");
  ASSERT_TRUE(writePlanFile(path, plan).ok());

  Plan back;
  Status s = readPlanFile(path, back);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(back.metadata.at("strategy"), "pipeline");
  ASSERT_EQ(back.devices.size(), 2u);
  EXPECT_EQ(back.devices[0].instructions.size(), 4u);
  EXPECT_EQ(back.devices[0].instructions[1].kernel, "relu");
  EXPECT_EQ(back.devices[0].instructions[1].location, "node/relu");
  EXPECT_EQ(back.devices[0].instructions[1].attrs,
            plan.devices[0].instructions[1].attrs);
  EXPECT_EQ(back.devices[0].instructions[1].stream, 0u);
  EXPECT_EQ(back.devices[1].instructions[1].stream, 2u);
  EXPECT_EQ(back.channels[0].bytes, 16u);
  ASSERT_EQ(back.weightBytes, 16u);
  EXPECT_EQ(0, std::memcmp(back.weightData, weights.data(), 16));
  // Weights are mapped at an aligned file offset.
  EXPECT_EQ(reinterpret_cast<uintptr_t>(back.weightData) % kWeightAlignment,
            0u);
}

TEST(PlanFile, RejectsTruncatedFile) {
  std::vector<float> weights;
  std::string path = tempPath("truncated.plan");
  ASSERT_TRUE(writePlanFile(path, twoDevicePlan(weights)).ok());
  std::vector<char> bytes = readBytes(path);
  for (size_t keep : {size_t(0), size_t(10), size_t(64), bytes.size() - 1}) {
    writeBytes(path, std::vector<char>(bytes.begin(), bytes.begin() + keep));
    Plan p;
    Status s = readPlanFile(path, p);
    EXPECT_FALSE(s.ok()) << "accepted a file cut to " << keep << " bytes";
  }
}

TEST(PlanFile, RejectsBadMagicVersionAndChecksum) {
  std::vector<float> weights;
  std::string path = tempPath("corrupt.plan");
  ASSERT_TRUE(writePlanFile(path, twoDevicePlan(weights)).ok());
  std::vector<char> good = readBytes(path);

  std::vector<char> bad = good;
  bad[0] = 'X';
  writeBytes(path, bad);
  Plan p;
  Status s = readPlanFile(path, p);
  EXPECT_NE(s.message().find("not a partc plan"), std::string::npos);

  bad = good;
  bad[8] = 99; // format version
  writeBytes(path, bad);
  s = readPlanFile(path, p);
  EXPECT_NE(s.message().find("format version 99"), std::string::npos);

  bad = good;
  bad[80] ^= 0x40; // inside the metadata
  writeBytes(path, bad);
  s = readPlanFile(path, p);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();

  bad = good;
  bad[bad.size() - 2] ^= 0x01; // inside the weights
  writeBytes(path, bad);
  s = readPlanFile(path, p);
  EXPECT_NE(s.message().find("checksum"), std::string::npos) << s.message();
}

TEST(PlanVerify, RejectsBufferOutsideArena) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.devices[0].instructions[1].outputs[0].offset = 24; // 24 + 16 > 32
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("exceeds the arena"), std::string::npos)
      << s.message();
}

TEST(PlanVerify, RejectsStreamsBeyondTheLimitOrOnTransfers) {
  std::vector<float> weights;
  Plan p = twoDevicePlan(weights);
  p.devices[1].instructions[1].stream = kMaxStreams;
  Status s = verifyPlan(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device 1 instruction 1 (kernel): stream 4 is "
                             "not below 4"),
            std::string::npos)
      << s.message();
  p.devices[1].instructions[1].stream = 3;
  EXPECT_TRUE(verifyPlan(p).ok());
  p.devices[1].instructions[0].stream = 1;
  s = verifyPlan(p);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("only kernels run on a stream other than 0"),
            std::string::npos)
      << s.message();
}

TEST(PlanVerify, RejectsUnpairedChannel) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.devices[1].instructions.erase(plan.devices[1].instructions.begin());
  Status s = verifyPlan(plan);
  EXPECT_FALSE(s.ok());
}

TEST(PlanVerify, RejectsDeadlock) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  // Device 1 now also sends to device 0, but only after receiving; device 0
  // waits for that before its own send: a cycle.
  plan.channels.push_back({1, 0, 16});
  plan.devices[0].instructions.insert(plan.devices[0].instructions.begin() + 2,
                                      io(OpCode::Recv, 1, arena(0, {4})));
  plan.devices[1].instructions.insert(plan.devices[1].instructions.begin() + 1,
                                      io(OpCode::Send, 1, arena(0, {4})));
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
}

TEST(PlanFile, RoundTripPreservesAllReduce) {
  Plan plan = allReducePlan(3);
  std::string path = tempPath("allreduce.plan");
  ASSERT_TRUE(writePlanFile(path, plan).ok());
  Plan back;
  Status s = readPlanFile(path, back);
  ASSERT_TRUE(s.ok()) << s.message();
  const Instruction &in = back.devices[2].instructions[2];
  EXPECT_EQ(in.op, OpCode::AllReduce);
  EXPECT_EQ(in.attrs.getInts("devices"), (std::vector<int64_t>{0, 1, 2}));
}

TEST(PlanVerify, RejectsAllReduceThatADeviceSkips) {
  Plan plan = allReducePlan(3);
  plan.devices[2].instructions.pop_back();
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("device 2 never meets all_reduce group 0"),
            std::string::npos)
      << s.message();
}

TEST(PlanVerify, RejectsAllReduceOfMismatchedGroup) {
  Plan plan = allReducePlan(2);
  plan.devices[1].instructions[2].attrs.set("devices",
                                            AttrValue::ofInts({1, 0}));
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("disagrees"), std::string::npos) << s.message();
  plan = allReducePlan(2);
  plan.devices[1].instructions[2].inputs[0].type.dtype = DType::I32;
  plan.devices[1].instructions[2].outputs[0].type.dtype = DType::I32;
  s = verifyPlan(plan);
  EXPECT_NE(s.message().find("f32"), std::string::npos) << s.message();
}

TEST(PlanVerify, RejectsCollectivesMetInDifferentOrders) {
  Plan plan = allReducePlan(2);
  // A second group: device 0 meets 0 then 1, device 1 meets 1 then 0.
  for (DeviceProgram &dev : plan.devices) {
    dev.arenaBytes = 64;
    dev.instructions.insert(
        dev.instructions.begin() + 3,
        allReduce(1, arena(16, {4}), arena(48, {4}), {0, 1}));
  }
  ASSERT_TRUE(verifyPlan(plan).ok()) << verifyPlan(plan).message();
  std::swap(plan.devices[1].instructions[2], plan.devices[1].instructions[3]);
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("group"), std::string::npos) << s.message();
}

TEST(PlanVerify, RejectsPartiallyWrittenOutput) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.outputs[0].type.shape = {8};
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("not fully written"), std::string::npos)
      << s.message();
}

TEST(PlanVerify, RejectsKernelWithoutItsParameter) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  Instruction &selu = plan.devices[0].instructions[1];
  selu.kernel = "selu";
  selu.attrs.set("alpha", AttrValue::ofFloats({1.5}));
  // gamma's default lives in the op's definition, never in the kernel.
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("'gamma'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("device 0 instruction 1"), std::string::npos)
      << s.message();
  selu.attrs.set("gamma", AttrValue::ofFloats({1.1}));
  EXPECT_TRUE(verifyPlan(plan).ok());
}

TEST(PlanVerify, RejectsUnknownKernel) {
  std::vector<float> weights;
  Plan plan = twoDevicePlan(weights);
  plan.devices[1].instructions[1].kernel = "frobnicate";
  Status s = verifyPlan(plan);
  EXPECT_NE(s.message().find("no CPU kernel named 'frobnicate'"),
            std::string::npos)
      << s.message();
}

} // namespace

namespace {

TEST(Trace, NamesInstructionsOrSpans) {
  std::vector<float> weights;
  Plan p = twoDevicePlan(weights);
  std::vector<TraceEvent> events(2);
  events[0].device = 0;
  events[0].index = 1; // the relu kernel, named after its instruction
  events[0].startUs = 1;
  events[0].durationUs = 2;
  events[1].device = 1;
  events[1].index = 0; // a streamed peer copy on the copy-stream track
  events[1].startUs = 3;
  events[1].durationUs = 4;
  events[1].name = "peer copy #0";
  events[1].category = "transfer";
  events[1].track = 1;
  events[1].batch = 7;
  std::string path = tempPath("trace.json");
  ASSERT_TRUE(writeTrace(path, p, "cuda", events).ok());
  std::vector<char> bytes = readBytes(path);
  std::string text(bytes.begin(), bytes.end());
  EXPECT_NE(text.find("\"name\": \"relu\", \"cat\": \"kernel\", \"ph\": \"X\", "
                      "\"pid\": 0, \"tid\": 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"name\": \"peer copy #0\", \"cat\": \"transfer\", "
                      "\"ph\": \"X\", \"pid\": 1, \"tid\": 1"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"batch\": 7"), std::string::npos) << text;
  EXPECT_NE(text.find("\"batch\": -1"), std::string::npos) << text;
  std::remove(path.c_str());
}

} // namespace
