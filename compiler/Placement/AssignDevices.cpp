//===- AssignDevices.cpp - partc-assign-devices ---------------------------===//
#include "compiler/Utils/PassUtils.h"
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include <limits>

namespace mlir::partc {
#define GEN_PASS_DEF_ASSIGNDEVICES
#include "compiler/Passes.h.inc"

namespace {

/// Cuts `costs` into `parts` contiguous non-empty groups minimizing the
/// largest group sum; returns the index where each group after the first
/// starts.
SmallVector<size_t> balancedCuts(ArrayRef<int64_t> costs, size_t parts) {
  size_t n = costs.size();
  SmallVector<int64_t> prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i)
    prefix[i + 1] = prefix[i] + costs[i];
  const int64_t inf = std::numeric_limits<int64_t>::max();
  // best[k][i]: smallest max-stage cost covering ops [0, i) with k stages.
  std::vector<std::vector<int64_t>> best(parts + 1,
                                         std::vector<int64_t>(n + 1, inf));
  std::vector<std::vector<size_t>> from(parts + 1,
                                        std::vector<size_t>(n + 1, 0));
  best[0][0] = 0;
  for (size_t k = 1; k <= parts; ++k)
    for (size_t i = k; i <= n; ++i)
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == inf)
          continue;
        int64_t cost = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        // Ties go to the later cut, which keeps early stages light.
        if (cost <= best[k][i]) {
          best[k][i] = cost;
          from[k][i] = j;
        }
      }
  SmallVector<size_t> cuts;
  for (size_t k = parts, i = n; k > 1; --k) {
    i = from[k][i];
    cuts.push_back(i);
  }
  std::reverse(cuts.begin(), cuts.end());
  return cuts;
}

struct AssignDevicesPass : public impl::AssignDevicesBase<AssignDevicesPass> {
  using AssignDevicesBase::AssignDevicesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    if (numDevices < 1) {
      module.emitError() << "--devices must be at least 1, got "
                         << static_cast<int64_t>(numDevices);
      return signalPassFailure();
    }
    SmallVector<Operation *> ops;
    for (Operation &op : func->getBody().front())
      if (!isa<graph::ConstantOp, func::ReturnOp>(op))
        ops.push_back(&op);

    SmallVector<size_t> cuts;
    if (!splitAt.empty()) {
      if (static_cast<int64_t>(splitAt.size()) + 1 != numDevices) {
        module.emitError() << "--split-at names " << splitAt.size()
                           << " cut(s), giving " << splitAt.size() + 1
                           << " stages, but "
                           << static_cast<int64_t>(numDevices)
                           << " devices were requested; give one cut fewer "
                              "than devices";
        return signalPassFailure();
      }
      for (const std::string &name : splitAt) {
        // The cut follows the last op imported from that node.
        std::optional<size_t> last;
        for (size_t i = 0; i < ops.size(); ++i)
          if (locationNamesNode(ops[i]->getLoc(), name))
            last = i;
        if (!last) {
          module.emitError() << "--split-at: no ONNX node named '" << name
                             << "' remains in the graph (node names are "
                                "printed by --emit=mlir as locations)";
          return signalPassFailure();
        }
        size_t cut = *last + 1;
        if (cut >= ops.size() || (!cuts.empty() && cut <= cuts.back())) {
          module.emitError() << "--split-at: cut after '" << name
                             << "' leaves an empty stage; cuts must follow "
                                "the graph's order and precede its last op";
          return signalPassFailure();
        }
        cuts.push_back(cut);
      }
    } else {
      if (numDevices > 1 && static_cast<int64_t>(ops.size()) < numDevices) {
        module.emitError() << "cannot split " << ops.size() << " op(s) over "
                           << static_cast<int64_t>(numDevices)
                           << " devices; use at most as many devices as ops "
                              "or the data-parallel strategy";
        return signalPassFailure();
      }
      SmallVector<int64_t> costs;
      for (Operation *op : ops) {
        int64_t flops = 1;
        if (auto cost = dyn_cast<graph::CostOpInterface>(op))
          flops = std::max<int64_t>(1, cost.estimateFlops());
        costs.push_back(flops);
      }
      cuts = balancedCuts(costs, numDevices);
    }
    size_t stage = 0;
    for (size_t i = 0; i < ops.size(); ++i) {
      while (stage < cuts.size() && i >= cuts[stage])
        ++stage;
      graph::setDevice(ops[i], stage);
    }
    setNumDevices(module, numDevices);
    recordPlacement(module, "strategy", "pipeline");
  }
};

} // namespace
} // namespace mlir::partc
