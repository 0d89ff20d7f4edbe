//===- TransferWindowTest.cpp - Lifetime of a transferred value -----------===//
#include "TestPlans.h"

#include <gtest/gtest.h>

using namespace partc::runtime;
using namespace partc::runtime::testing;

namespace {

TEST(TransferWindow, SenderFromProducerToSend) {
  std::vector<float> weights;
  Plan p = twoDevicePlan(weights);
  size_t first = 0, last = 0;
  // relu (1) writes the sent value, the send (2) reads it.
  ASSERT_TRUE(findTransferWindow(p.devices[0], 2, first, last));
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(last, 2u);
}

TEST(TransferWindow, ReceiverUntilItsLastReader) {
  std::vector<float> weights;
  Plan p = twoDevicePlan(weights);
  size_t first = 0, last = 0;
  ASSERT_TRUE(findTransferWindow(p.devices[1], 0, first, last));
  EXPECT_EQ(first, 0u);
  EXPECT_EQ(last, 1u);
}

TEST(TransferWindow, EndsWhereTheRangeIsWrittenAgain) {
  DeviceProgram d;
  d.instructions = {io(OpCode::Recv, 0, arena(0, {4})),
                    kernel("relu", {arena(0, {4})}, {arena(16, {4})}),
                    kernel("neg", {arena(16, {4})}, {arena(0, {4})}),
                    kernel("relu", {arena(0, {4})}, {arena(16, {4})})};
  size_t first = 0, last = 0;
  ASSERT_TRUE(findTransferWindow(d, 0, first, last));
  EXPECT_EQ(last, 1u); // instruction 3 reads the range's next value
}

TEST(TransferWindow, RejectsWhatCannotBeRedirected) {
  size_t first = 0, last = 0;
  DeviceProgram inPlace;
  inPlace.instructions = {io(OpCode::Recv, 0, arena(0, {4})),
                          kernel("relu", {arena(0, {4})}, {arena(0, {4})})};
  EXPECT_FALSE(findTransferWindow(inPlace, 0, first, last));

  DeviceProgram partial; // a reader that reaches past the value
  partial.instructions = {io(OpCode::Recv, 0, arena(0, {4})),
                          kernel("relu", {arena(0, {8})}, {arena(32, {8})})};
  EXPECT_FALSE(findTransferWindow(partial, 0, first, last));

  DeviceProgram loaded; // input loads may be skipped between batches
  loaded.instructions = {io(OpCode::LoadInput, 0, arena(0, {4})),
                         io(OpCode::Send, 0, arena(0, {4}))};
  EXPECT_FALSE(findTransferWindow(loaded, 1, first, last));

  DeviceProgram slice; // the sent value is part of a kernel's output
  slice.instructions = {kernel("relu", {arena(64, {8})}, {arena(0, {8})}),
                        io(OpCode::Send, 0, arena(0, {4}))};
  EXPECT_FALSE(findTransferWindow(slice, 1, first, last));

  DeviceProgram notTransfer;
  notTransfer.instructions = {
      kernel("relu", {arena(0, {4})}, {arena(16, {4})})};
  EXPECT_FALSE(findTransferWindow(notTransfer, 0, first, last));
}

TEST(TransferWindow, ForwardingSendReadsInsideTheWindow) {
  // A middle stage receives a value and sends it on (a skip edge).
  DeviceProgram d;
  d.instructions = {io(OpCode::Recv, 0, arena(0, {4})),
                    kernel("relu", {arena(0, {4})}, {arena(16, {4})}),
                    io(OpCode::Send, 1, arena(0, {4}))};
  size_t first = 0, last = 0;
  ASSERT_TRUE(findTransferWindow(d, 0, first, last));
  EXPECT_EQ(last, 2u);
}

} // namespace
