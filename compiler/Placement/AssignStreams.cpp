//===- AssignStreams.cpp - partc-assign-streams ---------------------------===//
//
// Finds fork-join regions (a value read by several ops whose chains meet
// again in one op, as in an Inception block) and, where the cost model
// predicts that their kernels leave the device partly idle, puts each
// branch on a stream of its own so that they share the GPU.
//
//===----------------------------------------------------------------------===//
#include "compiler/CostModel/OpCost.h"
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/bit.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_ASSIGNSTREAMS
#include "compiler/Passes.h.inc"

namespace cm = ::partc::costmodel;

namespace {

/// Branches of one fork: more would not fit the mask.
constexpr unsigned kMaxBranches = 32;
/// Ops looked at past a fork for the join.
constexpr size_t kMaxRegionOps = 4096;
/// The share of the predicted gain that a step shows. The occupancy rule
/// that decides which regions to split guesses at library kernels' grids,
/// and overstates what they gain: on an H200 GoogLeNet b32 ran 2-8% faster
/// on streams (session 33) where it predicts 22%, Inception v3 b32 under
/// 1% where it predicts 7%. Placement's predicted step loses this share of
/// the gain (session 41: the full gain put GoogLeNet's prediction 17% under
/// its measurement).
constexpr double kRealizedGainShare = 0.25;

struct Region {
  /// Ops of each branch, in block order.
  SmallVector<SmallVector<Operation *>> branches;
  Operation *join = nullptr;
  int64_t device = 0;
};

struct AssignStreamsPass : public impl::AssignStreamsBase<AssignStreamsPass> {
  using AssignStreamsBase::AssignStreamsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    int64_t streams = maxStreams;
    if (streams < 1 || streams > graph::GraphDialect::kMaxStreams) {
      module.emitError() << "partc-assign-streams: max-streams must be from "
                            "1 to "
                         << graph::GraphDialect::kMaxStreams << ", got "
                         << streams
                         << "; hint: 1 keeps every kernel on its device's one "
                            "stream";
      return signalPassFailure();
    }
    auto topo = topology.empty() ? cm::Topology::fromShorthand(devices)
                                 : cm::Topology::fromJsonFile(topology);
    if (!topo) {
      module.emitError() << "partc-assign-streams: "
                         << llvm::toString(topo.takeError());
      return signalPassFailure();
    }
    device_ = topo->weakest();
    tf32_ = topo->tf32;
    // The profile placement was costed with, so that the two agree.
    if (llvm::Error e = table_.loadAll(costTable)) {
      module.emitError() << "partc-assign-streams: --cost-table: "
                         << llvm::toString(std::move(e))
                         << "; hint: pass a profile written by partc-run "
                            "--profile";
      return signalPassFailure();
    }
    if (maxStreams == 1)
      return;
    int regions = 0;
    std::map<int64_t, double> savedOnDevice;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        assignFunction(func, regions, savedOnDevice);
    if (regions)
      recordSavings(module, regions, savedOnDevice);
  }

  /// Records the regions and their predicted gain, and takes the share of
  /// it that steps show off the step placement predicted on one stream a
  /// device: a pipeline's stages run one after another, so each stage's
  /// largest gain counts; replicas run side by side, so theirs count once.
  void recordSavings(ModuleOp module, int regions,
                     const std::map<int64_t, double> &savedOnDevice) {
    double total = 0, largest = 0;
    for (const auto &[device, seconds] : savedOnDevice) {
      total += seconds;
      largest = std::max(largest, seconds);
    }
    auto format = [](double ms) {
      char text[64];
      std::snprintf(text, sizeof(text), "%.4f", ms);
      return std::string(text);
    };
    recordPlacement(module, "branch_regions", std::to_string(regions));
    recordPlacement(module, "branch_saving_ms", format(total * 1e3));
    std::map<int64_t, double> largestOfStage;
    if (std::optional<std::string> stages =
            placementValue(module, "device_stages")) {
      SmallVector<StringRef> items;
      StringRef(*stages).split(items, ',');
      for (auto [device, seconds] : savedOnDevice) {
        int64_t stage = device;
        if (device < static_cast<int64_t>(items.size()))
          items[device].getAsInteger(10, stage);
        largestOfStage[stage] = std::max(largestOfStage[stage], seconds);
      }
    } else {
      largestOfStage[0] = largest;
    }
    double stepSaving = 0;
    for (const auto &[stage, seconds] : largestOfStage)
      stepSaving += seconds;
    auto lessSaving = [&](StringRef key, double saving) {
      std::optional<std::string> value = placementValue(module, key);
      double ms = 0;
      if (!value || StringRef(*value).getAsDouble(ms))
        return;
      recordPlacement(module, (key + "_one_stream").str(), *value);
      recordPlacement(module, key, format(std::max(0.0, ms - saving * 1e3)));
    };
    lessSaving("predicted_step_ms", kRealizedGainShare * stepSaving);
    lessSaving("predicted_period_ms", kRealizedGainShare * largest);
  }

  void assignFunction(func::FuncOp func, int &regions,
                      std::map<int64_t, double> &savedOnDevice) {
    Block &block = func.getBody().front();
    renumber(block);
    auto consider = [&](ValueRange values, size_t next) {
      std::optional<Region> region = findRegion(values, next);
      if (!region)
        return;
      double saving = assign(*region);
      if (saving > 0) {
        ++regions;
        savedOnDevice[region->device] += saving;
        renumber(block);
      }
    };
    // The function's inputs fork like any op's results.
    for (BlockArgument arg : block.getArguments())
      consider(arg, 0);
    // A weight read by several ops forks nothing: they share no data.
    for (size_t i = 0; i < order_.size(); ++i)
      if (!order_[i]->hasAttr(graph::GraphDialect::kStreamAttrName) &&
          !isa<graph::ConstantOp>(order_[i]))
        consider(order_[i]->getResults(), i + 1);
  }

  /// Block order, again after a region's ops moved.
  void renumber(Block &block) {
    order_.clear();
    position_.clear();
    for (Operation &op : block)
      order_.push_back(&op);
    for (size_t i = 0; i < order_.size(); ++i)
      position_[order_[i]] = i;
  }

  /// The region forked by `values` (an op's results, or an input), whose
  /// ops come from order_[next] on: the values' readers on one device start
  /// one branch each; the first op that descends from two branches must
  /// descend from all of them (the join); ops before it descend from one
  /// branch or from none (they stay where they are).
  std::optional<Region> findRegion(ValueRange values, size_t next) {
    SmallVector<Operation *> starts;
    std::optional<int64_t> device;
    for (Value value : values)
      for (Operation *user : value.getUsers()) {
        if (isa<func::ReturnOp, graph::TransferOp>(user) ||
            llvm::is_contained(starts, user))
          continue;
        std::optional<int64_t> d = graph::getDevice(user);
        if (!d || (device && *d != *device))
          return std::nullopt; // read on several devices: transfers decide
        device = d;
        starts.push_back(user);
      }
    if (starts.size() < 2 || starts.size() > kMaxBranches)
      return std::nullopt;
    llvm::sort(starts, [&](Operation *a, Operation *b) {
      return position_.lookup(a) < position_.lookup(b);
    });
    uint32_t all = starts.size() == 32 ? ~0u : (1u << starts.size()) - 1;
    DenseMap<Operation *, uint32_t> mask;
    for (size_t b = 0; b < starts.size(); ++b)
      mask[starts[b]] |= 1u << b;
    Region region;
    region.branches.resize(starts.size());
    size_t last = std::min(order_.size(), next + kMaxRegionOps);
    for (size_t i = next; i < last; ++i) {
      Operation *op = order_[i];
      uint32_t m = mask.lookup(op);
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          m |= mask.lookup(def);
      if (!m)
        continue;
      // Pipelined micro-batches keep the schedule placement gave them.
      if (graph::getDevice(op) != device ||
          op->hasAttr(graph::GraphDialect::kMicroBatchAttrName))
        return std::nullopt;
      if (llvm::popcount(m) > 1) {
        if (m != all)
          return std::nullopt; // two branches meet before the rest
        region.join = op;
        break;
      }
      if (isa<func::ReturnOp, graph::TransferOp>(op) ||
          op->hasAttr(graph::GraphDialect::kStreamAttrName))
        return std::nullopt;
      mask[op] = m;
      region.branches[llvm::countr_zero(m)].push_back(op);
    }
    if (!region.join)
      return std::nullopt;
    region.device = *device;
    // A reader that is the join itself starts no branch.
    llvm::erase_if(region.branches,
                   [](const SmallVector<Operation *> &b) { return b.empty(); });
    if (region.branches.size() < 2)
      return std::nullopt;
    return region;
  }

  /// How much of the device a kernel keeps busy: a product's blocks hold
  /// about 128 x 128 results, other kernels' about 1,024 values, eight to
  /// a multiprocessor. Only a kernel that leaves at least half the device
  /// idle counts as sharing it: on an H200, ResNet-50's blocks at batch 16
  /// (kernels filling 0.7 of it beside its downsampling) ran 1% slower on
  /// two streams (2026-11-28).
  double fill(Operation *op, const cm::OpWork &work) const {
    double elements = 0;
    for (Value r : op->getResults())
      if (auto t = dyn_cast<ShapedType>(r.getType()); t && t.hasStaticShape())
        elements += static_cast<double>(t.getNumElements());
    double perBlock = work.cls == cm::OpClass::Matrix ? 128.0 * 128.0 : 1024.0;
    double blocks = std::ceil(elements / perBlock);
    double resident = work.cls == cm::OpClass::Matrix ? 1.0 : 8.0;
    double share = blocks / (device_.multiprocessors * resident);
    return share <= 0.5 ? share : 1.0;
  }

  /// Predicts the region run on one stream and on one stream a branch; on
  /// a gain of at least `min-saving-us`, sets each branch's stream (the
  /// longest stays on stream 0, where the join runs). Returns the gain.
  double assign(const Region &region) {
    struct Branch {
      size_t index;
      double seconds = 0, busy = 0;
    };
    SmallVector<Branch> branches;
    double serial = 0, busy = 0, longest = 0;
    for (size_t b = 0; b < region.branches.size(); ++b) {
      Branch branch{b};
      for (Operation *op : region.branches[b]) {
        cm::OpWork work = cm::analyzeOp(op, /*batched=*/false);
        double t = cm::predictSeconds(work, 1.0, device_, tf32_,
                                      table_.empty() ? nullptr : &table_);
        branch.seconds += t;
        branch.busy += t * fill(op, work);
      }
      serial += branch.seconds;
      busy += branch.busy;
      longest = std::max(longest, branch.seconds);
      branches.push_back(branch);
    }
    // Kernels side by side share the device: the region takes at least its
    // longest branch and at least the device time its kernels occupy.
    double concurrent = std::max(longest, busy);
    double saving = serial - concurrent;
    if (saving < minSavingUs * 1e-6)
      return 0;
    llvm::stable_sort(branches, [](const Branch &a, const Branch &b) {
      return a.seconds > b.seconds;
    });
    OpBuilder builder(getOperation().getContext());
    for (size_t k = 0; k < branches.size(); ++k) {
      int64_t stream = k == 0 ? 0 : 1 + (k - 1) % (maxStreams - 1);
      for (Operation *op : region.branches[branches[k].index])
        op->setAttr(graph::GraphDialect::kStreamAttrName,
                    builder.getI64IntegerAttr(stream));
    }
    // Stream 0's branch goes last, just before the join: a backend starts a
    // side stream after what its main stream was given so far, so the side
    // branches must be given first. Only the join and the branch's own ops
    // read its values, so they stay defined before their uses.
    for (Operation *op : region.branches[branches[0].index])
      op->moveBefore(region.join);
    return saving;
  }

  cm::DeviceSpec device_;
  bool tf32_ = true;
  cm::CostTable table_;
  std::vector<Operation *> order_;
  DenseMap<Operation *, size_t> position_;
};

} // namespace
} // namespace mlir::partc
