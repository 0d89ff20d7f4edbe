//===- SearchPlacement.cpp - partc-search-placement ---------------------------------===//
#include "compiler/Utils/PassUtils.h"
#include "compiler/Passes.h"
#include "compiler/Placement/PlacementSearch.h"

#include "llvm/Support/raw_ostream.h"

namespace mlir::partc {
#define GEN_PASS_DEF_SEARCHPLACEMENT
#include "compiler/Passes.h.inc"

namespace {

std::string joined(ArrayRef<std::string> parts) {
  std::string s;
  for (const std::string &p : parts)
    s += (s.empty() ? "" : ",") + p;
  return s;
}

/// What the plan's metadata says of the choice: partc-run compares its
/// measurements with the predictions.
void recordChoice(ModuleOp module, StringRef strategy, const SearchResult &r) {
  const Candidate &best = r.best;
  recordPlacement(module, "strategy", (strategy + ": " + best.label()).str());
  recordPlacement(module, "micro_batches", std::to_string(best.microBatches));
  recordPlacement(module, "predicted_step_ms",
                   std::to_string(best.stepSeconds * 1e3));
  recordPlacement(module, "predicted_period_ms",
                   std::to_string(best.periodSeconds * 1e3));
  recordPlacement(module, "stages", std::to_string(best.stages));
  std::vector<std::string> stageMs;
  for (const StageReport &st : best.stageReports)
    stageMs.push_back(std::to_string(st.seconds * 1e3));
  recordPlacement(module, "predicted_stage_ms", joined(stageMs));
  // Which stage each plan device runs (replicas are chains of devices over
  // fast links, not necessarily consecutive indices).
  std::vector<int64_t> stageOf(best.stages * best.replicas, 0);
  for (int64_t rep = 0; rep < best.replicas; ++rep)
    for (int64_t k = 0; k < best.stages; ++k)
      if (best.device(rep, k) < static_cast<int64_t>(stageOf.size()))
        stageOf[best.device(rep, k)] = k;
  std::vector<std::string> deviceStages;
  for (int64_t k : stageOf)
    deviceStages.push_back(std::to_string(k));
  recordPlacement(module, "device_stages", joined(deviceStages));
  recordPlacement(module, "topology", r.topology);
}

struct SearchPlacementPass : public impl::SearchPlacementBase<SearchPlacementPass> {
  using SearchPlacementBase::SearchPlacementBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      module.emitError() << message;
      signalPassFailure();
    };
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    auto topo = topology.empty()
                    ? ::partc::costmodel::Topology::fromShorthand(devices)
                    : ::partc::costmodel::Topology::fromJsonFile(topology);
    if (!topo)
      return fail(llvm::toString(topo.takeError()));
    if (memoryGiB > 0)
      for (auto &d : topo->devices)
        d.memoryBytes = memoryGiB * 1024.0 * 1024 * 1024;
    if (objective != "throughput" && objective != "latency")
      return fail("objective must be throughput or latency, got '" + objective +
                  "'");
    if (!explain.empty() && explain != "text" && explain != "json")
      return fail("explain takes text or json, got '" + explain + "'");
    ::partc::costmodel::CostTable table;
    // Several profiles (say, at batch 64 and at micro-batch sizes) merge.
    if (llvm::Error e = table.loadAll(costTable))
      return fail(llvm::toString(std::move(e)));
    int64_t numDevices = static_cast<int64_t>(topo->size());
    SearchOptions options;
    options.topology = std::move(*topo);
    options.objective = objective;
    options.costTable = table.empty() ? nullptr : &table;
    options.stages = stages;
    options.replicas = replicas;
    options.microBatches = microBatches;
    options.fusedAttention = fusedAttention;
    if (strategy == "single") {
      options.stages = options.replicas = 1;
    } else if (strategy == "pipeline") {
      options.stages = numDevices;
      options.replicas = 1;
    } else if (strategy == "data") {
      options.stages = 1;
      options.replicas = numDevices;
      options.microBatches = 1;
    } else if (strategy != "auto") {
      return fail("unknown strategy '" + strategy +
                  "'; expected auto, single, pipeline or data");
    }
    auto result = searchPlacement(*func, options);
    if (failed(result))
      return signalPassFailure();
    const Candidate &best = result->best;
    std::vector<std::string> cuts;
    for (size_t c : best.cuts)
      cuts.push_back(std::to_string(c));
    module.emitRemark() << "plan: " << best.label() << ", cuts before ops ["
                        << joined(cuts) << "]";
    if (explain == "text")
      llvm::outs() << explainText(*result);
    else if (explain == "json")
      llvm::outs() << explainJson(*result);
    if (failed(applyPlacement(module, *func, best)))
      return signalPassFailure();
    recordChoice(module, strategy, *result);
  }
};
} // namespace
} // namespace mlir::partc
