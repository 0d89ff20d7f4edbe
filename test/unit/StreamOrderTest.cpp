//===- StreamOrderTest.cpp - Waits between a program's streams ------------===//
#include "TestPlans.h"

#include <gtest/gtest.h>

using namespace partc::runtime;
using namespace partc::runtime::testing;

namespace {

Instruction onStream(Instruction in, uint8_t stream) {
  in.stream = stream;
  return in;
}

/// Waits as a backend that joins its streams before every instruction
/// that is not a kernel finds them.
std::vector<std::vector<StreamWait>> waitsOf(const DeviceProgram &program) {
  auto joinsAll = [&](size_t i) {
    return program.instructions[i].op != OpCode::Kernel;
  };
  auto streamOf = [&](size_t i) -> uint8_t {
    return joinsAll(i) ? 0 : program.instructions[i].stream;
  };
  return streamWaits(program, joinsAll, streamOf);
}

bool waitsFor(const std::vector<StreamWait> &waits, uint8_t stream,
              uint32_t instruction) {
  for (const StreamWait &w : waits)
    if (w.stream == stream && w.instruction == instruction)
      return true;
  return false;
}

} // namespace

// An Inception-like region: two side branches and the main stream read one
// input; the join waits for the branch it reads only; a kernel reusing a
// branch's bytes waits for the branch that last read them; after a join
// (an output store) a side stream follows everything before it; a kernel
// reading what a side stream wrote waits for it.
TEST(StreamOrder, WaitsFollowTheBytesEachInstructionTouches) {
  DeviceProgram p;
  p.instructions = {
      io(OpCode::LoadInput, 0, arena(0, {16})),                         // 0
      onStream(kernel("neg", {arena(0, {16})}, {arena(64, {16})}), 1),  // 1
      onStream(kernel("exp", {arena(0, {16})}, {arena(128, {16})}), 2), // 2
      kernel("abs", {arena(0, {16})}, {arena(192, {16})}),              // 3
      kernel("add", {arena(64, {16}), arena(192, {16})},
             {arena(320, {16})}),                                       // 4
      kernel("relu", {arena(128, {16})}, {arena(64, {16})}),            // 5
      io(OpCode::StoreOutput, 0, arena(64, {16})),                      // 6
      onStream(kernel("neg", {arena(0, {16})}, {arena(128, {16})}), 1), // 7
      kernel("abs", {arena(128, {16})}, {arena(192, {16})}),            // 8
  };
  auto waits = waitsOf(p);
  ASSERT_EQ(waits.size(), p.instructions.size());
  // A side stream's first kernel starts after the main stream's work so
  // far: the input's load needs no wait of its own.
  EXPECT_TRUE(waits[1].empty());
  EXPECT_TRUE(waits[2].empty());
  EXPECT_TRUE(waits[3].empty());
  // The join reads stream 1's result, not stream 2's.
  ASSERT_EQ(waits[4].size(), 1u);
  EXPECT_TRUE(waitsFor(waits[4], 1, 1));
  // Reads stream 2's result into bytes stream 1 wrote, which the main
  // stream already follows.
  ASSERT_EQ(waits[5].size(), 1u);
  EXPECT_TRUE(waitsFor(waits[5], 2, 2));
  // The store joins every stream; stream 1 then starts after it.
  EXPECT_TRUE(waits[6].empty());
  EXPECT_TRUE(waits[7].empty());
  ASSERT_EQ(waits[8].size(), 1u);
  EXPECT_TRUE(waitsFor(waits[8], 1, 7));
}

// Two streams that only read the same bytes need no order; a write to
// what another stream reads does, and state counts like the arena while
// weights never do.
TEST(StreamOrder, ReadsShareWritesWait) {
  DeviceProgram p;
  BufferRef weight{MemorySpace::Weight, 0, {DType::F32, {16}}};
  BufferRef state{MemorySpace::State, 0, {DType::F32, {16}}};
  p.instructions = {
      kernel("relu", {weight}, {arena(0, {16})}), // 0
      onStream(kernel("neg", {arena(0, {16}), weight}, {arena(64, {16})}),
               1),                                                 // 1
      kernel("exp", {arena(0, {16}), weight}, {arena(128, {16})}), // 2
      onStream(kernel("abs", {arena(128, {16})}, {state}), 1),     // 3
      kernel("sgd", {state}, {state}),                             // 4
  };
  auto waits = waitsOf(p);
  EXPECT_TRUE(waits[1].empty()); // the fork orders it after instruction 0
  EXPECT_TRUE(waits[2].empty()); // both read arena 0 and the weight
  ASSERT_EQ(waits[3].size(), 1u);
  EXPECT_TRUE(waitsFor(waits[3], 0, 2));
  ASSERT_EQ(waits[4].size(), 1u);
  EXPECT_TRUE(waitsFor(waits[4], 1, 3));
}
