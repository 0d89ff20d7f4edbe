//===- PlanMemory.cpp - partc-plan-memory ---------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/RuntimeBridge.h"
#include "dialects/Plan/PlanDialect.h"

#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_PLANMEMORY
#include "compiler/Passes.h.inc"

namespace {

constexpr int64_t kAlignment = 64;

struct Interval {
  plan::AllocOp alloc;
  int64_t begin, end, size;
  int64_t offset = -1;
};

int64_t bufferBytes(Value v) {
  return static_cast<int64_t>(
      toTensorType(cast<ShapedType>(v.getType())).byteSize());
}

/// Last position at which `v` (or a view of it) is used; a sent buffer
/// stays live until its channel's wait_consumed.
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
  }
  return last;
}

struct PlanMemoryPass : public impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([&](plan::DeviceOp device) { planDevice(device); });
  }

  void planDevice(plan::DeviceOp device) {
    Block &block = device.getBody().front();
    DenseMap<Operation *, int64_t> position;
    std::map<int64_t, int64_t> waitPosition;
    int64_t pos = 0;
    for (Operation &op : block) {
      position[&op] = pos;
      if (auto wait = dyn_cast<plan::WaitConsumedOp>(op))
        waitPosition[wait.getChannel()] = pos;
      ++pos;
    }
    std::vector<Interval> intervals;
    for (Operation &op : block)
      if (auto alloc = dyn_cast<plan::AllocOp>(op)) {
        int64_t size = (bufferBytes(alloc.getResult()) + kAlignment - 1) /
                       kAlignment * kAlignment;
        int64_t begin = position[&op];
        int64_t end = lastUse(alloc.getResult(), position, waitPosition, pos);
        // A model input's bytes are kept for the whole program, so that a
        // run may reuse the inputs the previous one loaded (partc-run
        // --keep-inputs) instead of reading garbage.
        if (llvm::any_of(alloc.getResult().getUsers(), [](Operation *user) {
              return isa<plan::LoadInputOp>(user);
            })) {
          begin = 0;
          end = pos;
        }
        intervals.push_back({alloc, begin, std::max(end, begin), size});
      }
    // Largest first, each at the lowest offset free over its lifetime.
    std::vector<size_t> order(intervals.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return intervals[a].size > intervals[b].size;
    });
    std::vector<size_t> placed;
    int64_t arena = 0;
    for (size_t i : order) {
      Interval &cur = intervals[i];
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (size_t j : placed) {
        const Interval &o = intervals[j];
        if (o.begin <= cur.end && cur.begin <= o.end)
          busy.push_back({o.offset, o.offset + o.size});
      }
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [b, e] : busy) {
        if (offset + cur.size <= b)
          break;
        offset = std::max(offset, e);
      }
      cur.offset = offset;
      arena = std::max(arena, offset + cur.size);
      placed.push_back(i);
    }
    OpBuilder b(device.getContext());
    for (Interval &iv : intervals)
      iv.alloc.setOffsetAttr(b.getI64IntegerAttr(iv.offset));
    device.setArenaSizeAttr(b.getI64IntegerAttr(arena));
  }
};

} // namespace
} // namespace mlir::partc
