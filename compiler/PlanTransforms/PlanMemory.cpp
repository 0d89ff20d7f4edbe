//===- PlanMemory.cpp - partc-plan-memory ---------------------------------===//
#include "compiler/Passes.h"
#include "compiler/PlanTransforms/BufferLiveness.h"

#include "dialects/Plan/PlanDialect.h"

#include <algorithm>

namespace mlir::partc {
#define GEN_PASS_DEF_PLANMEMORY
#include "compiler/Passes.h.inc"

namespace {

struct PlanMemoryPass : public impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([&](plan::DeviceOp device) { planDevice(device); });
  }

  void planDevice(plan::DeviceOp device) {
    DeviceLiveness liveness = analyzeBufferLiveness(device);
    std::vector<BufferInterval> &intervals = liveness.buffers;
    keepBranchBuffersToJoin(device, liveness);
    std::vector<int64_t> offsets(intervals.size(), -1);
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
      const BufferInterval &cur = intervals[i];
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (size_t j : placed) {
        const BufferInterval &o = intervals[j];
        if (o.begin <= cur.end && cur.begin <= o.end)
          busy.push_back({offsets[j], offsets[j] + o.size});
      }
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [b, e] : busy) {
        if (offset + cur.size <= b)
          break;
        offset = std::max(offset, e);
      }
      offsets[i] = offset;
      arena = std::max(arena, offset + cur.size);
      placed.push_back(i);
    }
    OpBuilder b(device.getContext());
    for (size_t i = 0; i < intervals.size(); ++i)
      intervals[i].alloc.setOffsetAttr(b.getI64IntegerAttr(offsets[i]));
    device.setArenaSizeAttr(b.getI64IntegerAttr(arena));
  }

  /// Kernels of a region whose branches run on streams of their own
  /// (`stream`, partc-assign-streams) must not reuse each other's memory,
  /// or the backend would order them by it: a buffer that such a kernel
  /// touches stays live until the first later kernel without a stream
  /// (the region's join).
  static void keepBranchBuffersToJoin(plan::DeviceOp device,
                                      DeviceLiveness &liveness) {
    std::vector<int64_t> mainKernels;
    bool anyBranch = false;
    for (Operation &op : device.getBody().front())
      if (auto kernel = dyn_cast<plan::KernelOp>(op)) {
        anyBranch = anyBranch || kernel.getStream();
        if (!kernel.getStream())
          mainKernels.push_back(liveness.position.lookup(&op));
      }
    if (!anyBranch)
      return;
    auto touchedByBranch = [&](BufferInterval &interval) {
      SmallVector<Value> values = {interval.alloc.getResult()};
      while (!values.empty()) {
        Value v = values.pop_back_val();
        for (Operation *user : v.getUsers()) {
          if (auto kernel = dyn_cast<plan::KernelOp>(user);
              kernel && kernel.getStream())
            return true;
          if (auto view = dyn_cast<plan::ViewOp>(user))
            values.push_back(view.getResult());
        }
      }
      return false;
    };
    for (BufferInterval &interval : liveness.buffers) {
      if (!touchedByBranch(interval))
        continue;
      auto join = std::upper_bound(mainKernels.begin(), mainKernels.end(),
                                   interval.end);
      interval.end = join == mainKernels.end()
                         ? static_cast<int64_t>(liveness.position.size())
                         : *join;
    }
  }
};

} // namespace
} // namespace mlir::partc
