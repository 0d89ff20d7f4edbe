//===- SearchPlan.cpp - partc-search-plan ---------------------------------===//
#include "compiler/Transforms/PassUtils.h"
#include "compiler/Transforms/Passes.h"
#include "compiler/Transforms/PlanSearch.h"

namespace mlir::partc {
#define GEN_PASS_DEF_SEARCHPLAN
#include "compiler/Transforms/Passes.h.inc"

namespace {
struct SearchPlanPass : public impl::SearchPlanBase<SearchPlanPass> {
  using SearchPlanBase::SearchPlanBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    auto topo = topology.empty()
                    ? ::partc::costmodel::Topology::fromShorthand(devices)
                    : ::partc::costmodel::Topology::fromJsonFile(topology);
    if (!topo) {
      module.emitError() << llvm::toString(topo.takeError());
      return signalPassFailure();
    }
    if (memoryGiB > 0)
      for (auto &d : topo->devices)
        d.memoryBytes = memoryGiB * 1024.0 * 1024 * 1024;
    if (objective != "throughput" && objective != "latency") {
      module.emitError() << "objective must be throughput or latency, got '"
                         << std::string(objective) << "'";
      return signalPassFailure();
    }
    SearchOptions options;
    options.topology = std::move(*topo);
    options.objective = objective;
    options.stages = stages;
    options.replicas = replicas;
    options.microBatches = microBatches;
    auto result = searchPlan(*func, options);
    if (failed(result))
      return signalPassFailure();
    const Candidate &best = result->best;
    std::string cuts;
    for (size_t c : best.cuts)
      cuts += (cuts.empty() ? "" : ",") + std::to_string(c);
    module.emitRemark() << "plan: " << best.label() << ", cuts before ops ["
                        << cuts << "]";
    if (failed(applyPlan(module, *func, best)))
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::partc
