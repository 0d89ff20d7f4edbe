//===- BufferLiveness.cpp -------------------------------------------------===//
#include "compiler/PlanTransforms/BufferLiveness.h"

#include "dialects/Graph/RuntimeBridge.h"

#include <map>

namespace mlir::partc {

namespace {

int64_t bufferBytes(Value v) {
  return static_cast<int64_t>(
      toTensorType(cast<ShapedType>(v.getType())).byteSize());
}

/// Last position at which `v` (or a view of it) is used; a sent buffer
/// stays live until its channel's wait_consumed, an all_reduce's input as
/// long as its average.
int64_t lastUse(Value v, DenseMap<Operation *, int64_t> &position,
                const std::map<int64_t, int64_t> &waitPosition,
                int64_t blockEnd) {
  int64_t last = -1;
  for (Operation *user : v.getUsers()) {
    last = std::max(last, position.lookup(user));
    if (auto view = dyn_cast<plan::ViewOp>(user))
      last = std::max(
          last, lastUse(view.getResult(), position, waitPosition, blockEnd));
    if (auto send = dyn_cast<plan::SendOp>(user)) {
      auto it = waitPosition.find(send.getChannel());
      last = std::max(last, it == waitPosition.end() ? blockEnd : it->second);
    }
    // A collective runs alongside the instructions after it until its
    // average is read: its input stays untouched that long.
    if (auto reduce = dyn_cast<plan::AllReduceOp>(user))
      for (auto [source, target] :
           llvm::zip(reduce.getSources(), reduce.getTargets()))
        if (source == v)
          last =
              std::max(last, lastUse(target, position, waitPosition, blockEnd));
  }
  return last;
}

} // namespace

DeviceLiveness analyzeBufferLiveness(plan::DeviceOp device) {
  DeviceLiveness result;
  Block &block = device.getBody().front();
  DenseMap<Operation *, int64_t> &position = result.position;
  std::map<int64_t, int64_t> waitPosition;
  int64_t pos = 0;
  for (Operation &op : block) {
    position[&op] = pos;
    if (auto wait = dyn_cast<plan::WaitConsumedOp>(op))
      waitPosition[wait.getChannel()] = pos;
    ++pos;
  }
  for (Operation &op : block) {
    auto alloc = dyn_cast<plan::AllocOp>(op);
    if (!alloc)
      continue;
    BufferInterval interval;
    interval.alloc = alloc;
    interval.size = (bufferBytes(alloc.getResult()) + kArenaAlignment - 1) /
                    kArenaAlignment * kArenaAlignment;
    interval.begin = position[&op];
    interval.end = std::max(interval.begin, lastUse(alloc.getResult(), position,
                                                    waitPosition, pos));
    interval.isInput =
        llvm::any_of(alloc.getResult().getUsers(), [](Operation *user) {
          return isa<plan::LoadInputOp>(user);
        });
    if (interval.isInput) {
      interval.begin = 0;
      interval.end = pos;
    }
    result.buffers.push_back(interval);
  }
  return result;
}

} // namespace mlir::partc
