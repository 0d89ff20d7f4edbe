//===- TrainingSearch.cpp - Choose how a training step spreads ------------===//
//
// Costs the forward graph before differentiation: a training step's work is
// taken as three times the forward pass's (the backward pass computes a
// gradient for each input of a layer and another for its weights, about
// twice the forward's work, as Narayanan et al. count it for PipeDream,
// SOSP 2019), so every op's time comes from the inference cost model.
//
//===----------------------------------------------------------------------===//
#include "compiler/Placement/TrainingSearch.h"

#include "compiler/Placement/BatchSplit.h"
#include "compiler/Placement/PlacementSearch.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

namespace mlir::partc {

namespace cm = ::partc::costmodel;

namespace {

/// A training step's work per forward op (see the file comment).
constexpr double kStepWorkPerForward = 3.0;

/// Headroom left on each device for workspaces, fragmentation and what the
/// estimate misses; the compile's exact check (partc-report-step-memory)
/// has the last word.
constexpr double kUsableMemory = 0.9;

/// Contiguous stages of `seconds` that minimize the slowest: the least
/// bound for which greedy packing needs at most `stages` parts (binary
/// search over the bound). Returns the cut positions (first op of stages
/// 1..S-1); fewer when the ops are fewer.
std::vector<size_t> balancedCuts(const std::vector<double> &seconds,
                                 int64_t stages) {
  auto cutsFor = [&](double bound) {
    std::vector<size_t> cuts;
    double acc = 0;
    for (size_t i = 0; i < seconds.size(); ++i) {
      if (acc > 0 && acc + seconds[i] > bound) {
        cuts.push_back(i);
        acc = 0;
      }
      acc += seconds[i];
    }
    return cuts;
  };
  double lo = 0, hi = 0;
  for (double t : seconds) {
    lo = std::max(lo, t);
    hi += t;
  }
  for (int iter = 0; iter < 50; ++iter) {
    double mid = (lo + hi) / 2;
    if (static_cast<int64_t>(cutsFor(mid).size()) + 1 <= stages)
      hi = mid;
    else
      lo = mid;
  }
  return cutsFor(hi);
}

/// The values of `op` its gradient reads, so the forward pass keeps them
/// for the backward pass: a weighted op's activation inputs (for the
/// weights' gradients) and a nonlinear op's input or output. Ops that move
/// or add values keep nothing; ops not listed keep their result, the
/// cautious guess.
SmallVector<Value> keptForGradient(Operation *op) {
  SmallVector<Value> kept;
  auto batchedOperands = [&] {
    for (Value v : op->getOperands())
      if (!v.getDefiningOp<graph::ConstantOp>())
        kept.push_back(v);
  };
  if (isa<graph::ConvOp, graph::GemmOp, graph::MatMulOp, graph::StridedMatMulOp,
          graph::MulOp, graph::DivOp, graph::PowOp, graph::MaxPoolOp,
          graph::BatchNormOp, graph::LayerNormOp, graph::RmsNormOp,
          graph::GeluOp, graph::ErfOp, graph::SqrtOp, graph::MinOp,
          graph::MaxOp, graph::WhereOp>(op))
    batchedOperands();
  else if (isa<graph::ReluOp, graph::SigmoidOp, graph::TanhOp, graph::ExpOp,
               graph::SoftmaxOp, graph::LogSoftmaxOp>(op))
    kept.push_back(op->getResult(0));
  else if (!isa<graph::AddOp, graph::SubOp, graph::NegOp, graph::ReshapeOp,
                graph::TransposeOp, graph::ConcatOp, graph::SliceOp,
                graph::SplitOp, graph::IdentityOp, graph::ExpandOp,
                graph::AvgPoolOp, graph::GlobalAvgPoolOp, graph::ReduceSumOp,
                graph::ReduceMeanOp, graph::CastOp>(op) &&
           op->getNumResults() > 0)
    kept.push_back(op->getResult(0));
  return kept;
}

class TrainingSearch {
public:
  TrainingSearch(func::FuncOp func, const TrainingSearchOptions &options)
      : func_(func), options_(options), topo_(options.topology) {}
  FailureOr<TrainingSearchResult> run();

private:
  void cost(TrainingCandidate &c) const;

  func::FuncOp func_;
  const TrainingSearchOptions &options_;
  const cm::Topology &topo_;
  SmallVector<Operation *> ops_;
  std::vector<cm::OpWork> work_;
  Liveness live_;
  /// Per op: the bytes of its results that the backward pass reads (at
  /// the whole batch).
  std::vector<double> keptBytes_;
  BatchInfo batchInfo_;
  int64_t batch_ = 1;
  cm::DeviceSpec device_;
  TrainingSearchResult result_;
};

void TrainingSearch::cost(TrainingCandidate &c) const {
  int64_t s = c.stages, r = c.replicas, m = c.microBatches;
  int64_t slice = batch_ / (r * m);
  double fraction = static_cast<double>(slice) / static_cast<double>(batch_);
  size_t n = ops_.size();
  std::vector<double> seconds(n);
  for (size_t i = 0; i < n; ++i)
    seconds[i] = kStepWorkPerForward *
                 cm::predictSeconds(work_[i], fraction, device_, topo_.tf32,
                                    options_.costTable, batch_, slice);
  std::vector<size_t> bounds = {0};
  for (size_t cut : balancedCuts(seconds, s))
    bounds.push_back(cut);
  bounds.push_back(n);
  if (static_cast<int64_t>(bounds.size()) - 1 != s) {
    c.whyNot = "more stages than ops to spread";
    return;
  }
  c.possible = true;
  std::vector<size_t> chain = topo_.chainGroups(r, s);
  cm::LinkSpec stageLink = topo_.slowestChainLink(chain, s);
  // Replicas' all-reduce crosses the slowest link of the whole group.
  cm::LinkSpec replicaLink = topo_.slowestLink(0, topo_.size());
  double slowest = 0, slowestTransfer = 0;
  c.stageMemoryBytes.clear();
  for (int64_t k = 0; k < s; ++k) {
    size_t first = bounds[k], end = bounds[k + 1];
    double stage = 0, weights = 0, kept = 0;
    int64_t weightOps = 0;
    for (size_t i = first; i < end; ++i) {
      stage += seconds[i];
      weights += work_[i].weightBytes;
      weightOps += work_[i].weightBytes > 0;
      // What the backward pass reads stays from the forward pass.
      if (work_[i].batched)
        kept += keptBytes_[i] * fraction;
    }
    // Activations forward and their gradients back, once per micro-batch
    // on each cut this stage receives (transfers not overlapped).
    double transfer = 0;
    if (k > 0 && stageLink.bytesPerSecond > 0)
      transfer =
          2 * (live_.cutBytes[first] * fraction / stageLink.bytesPerSecond +
               stageLink.latencySeconds);
    slowest = std::max(slowest, stage + transfer);
    slowestTransfer = std::max(slowestTransfer, transfer);
    // Ring all-reduce of the stage's gradients among its replicas,
    // started as gradients come: the last micro-batch's backward pass
    // (two thirds of its time) hides it, except the last gradient's.
    double exposed = 0;
    if (r > 1 && replicaLink.bytesPerSecond > 0) {
      // One collective per bucket of gradients.
      double buckets = std::clamp(
          std::ceil(weights / double(allReduceBucketBytes(replicaLink, r))),
          1.0, double(std::max<int64_t>(weightOps, 1)));
      double ring = 2.0 * double(r - 1) / double(r) * weights /
                        replicaLink.bytesPerSecond +
                    2.0 * double(r - 1) * replicaLink.latencySeconds * buckets;
      double backward = stage * 2.0 / 3.0;
      exposed = std::max(0.0, ring - backward) + ring / buckets;
    }
    // The update reads parameter and gradient and writes the parameter,
    // and reads and writes each state copy.
    double update = weights * double(3 + 2 * options_.stateCopies) /
                    device_.memoryBytesPerSecond;
    c.allReduceSeconds = std::max(c.allReduceSeconds, exposed);
    c.updateSeconds = std::max(c.updateSeconds, update);
    // 1F1B keeps at most S - k micro-batches in flight on stage k, GPipe
    // all of them.
    int64_t inFlight = c.schedule == "gpipe" ? m : std::min<int64_t>(m, s - k);
    // Parameters, gradients and state copies; replicas keep the averaged
    // gradients apart from their own, micro-batches an accumulator.
    int64_t copies = 2 + options_.stateCopies + (r > 1) + (m > 1);
    double memory = weights * double(copies) + kept * double(inFlight);
    c.stageMemoryBytes.push_back(memory);
  }
  c.computeSeconds = double(m) * slowest;
  c.bubbleSeconds = double(s - 1) * slowest;
  c.transferSeconds = double(m) * slowestTransfer;
  c.fixedSeconds = s * r > 1 ? kMultiDeviceStepSeconds : 0.0;
  c.stepSeconds = c.computeSeconds + c.bubbleSeconds + c.allReduceSeconds +
                  c.updateSeconds + c.fixedSeconds;
  double capacity = topo_.smallestMemory() * kUsableMemory;
  for (int64_t k = 0; k < s; ++k)
    if (c.stageMemoryBytes[k] > capacity) {
      c.whyNot = "stage " + std::to_string(k) + " needs about " +
                 gib(c.stageMemoryBytes[k]) + " of " +
                 gib(topo_.smallestMemory()) + " per device";
      return;
    }
  c.feasible = true;
}

FailureOr<TrainingSearchResult> TrainingSearch::run() {
  auto start = std::chrono::steady_clock::now();
  for (Operation &op : func_.getBody().front())
    if (!isa<graph::ConstantOp, func::ReturnOp>(op))
      ops_.push_back(&op);
  // Nothing to rank: the compile says what is wrong with the model.
  if (ops_.empty())
    return result_;
  batchInfo_ = analyzeBatch(func_);
  batch_ = std::max<int64_t>(batchInfo_.batch, 1);
  for (Operation *op : ops_)
    work_.push_back(cm::analyzeOp(op, batchInfo_.batchedOps.contains(op)));
  live_ = analyzeLiveness(ops_);
  DenseMap<Operation *, size_t> index;
  for (size_t i = 0; i < ops_.size(); ++i)
    index[ops_[i]] = i;
  keptBytes_.assign(ops_.size(), 0);
  DenseSet<Value> kept;
  for (Operation *op : ops_)
    for (Value v : keptForGradient(op)) {
      auto producer = index.find(v.getDefiningOp());
      if (producer != index.end() && kept.insert(v).second)
        keptBytes_[producer->second] += static_cast<double>(
            toTensorType(cast<ShapedType>(v.getType())).byteSize());
    }
  device_ = topo_.weakest();
  result_.batch = batch_;
  result_.topology = topo_.describe();

  int64_t devices = static_cast<int64_t>(topo_.size());
  std::vector<std::string> schedules = {"1f1b", "gpipe"};
  if (options_.schedule == "gpipe" || options_.schedule == "1f1b")
    schedules = {options_.schedule};
  for (int64_t s = 1; s <= devices; ++s) {
    if (devices % s)
      continue;
    int64_t r = devices / s;
    // A pipeline overlaps its stages with micro-batches; one stage takes
    // them only to save memory (gradient accumulation).
    std::vector<int64_t> counts = {1, 2, 4};
    if (s > 1) {
      counts = {1, 2, 4, 8, s, 2 * s, 4 * s};
      llvm::sort(counts);
      counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    }
    if (options_.microBatches > 0)
      counts = {options_.microBatches};
    for (int64_t m : counts)
      for (const std::string &schedule : schedules) {
        if (s == 1 && schedule != schedules.front())
          continue;
        TrainingCandidate c;
        c.stages = s;
        c.replicas = r;
        c.microBatches = m;
        c.schedule = schedule;
        if ((r > 1 || m > 1) && !batchInfo_.splittable)
          c.whyNot = "the batch cannot be split: " + batchInfo_.why;
        else if (batch_ % (r * m))
          c.whyNot = "the batch of " + std::to_string(batch_) +
                     " does not divide into " + std::to_string(r * m) +
                     " slices";
        else
          cost(c);
        result_.candidates.push_back(c);
      }
  }
  // One device of the same kind, for --explain to compare.
  if (devices > 1) {
    TrainingCandidate one;
    cost(one);
    if (one.feasible)
      result_.oneDeviceSeconds = one.stepSeconds;
  }
  std::stable_sort(result_.candidates.begin(), result_.candidates.end(),
                   [](const TrainingCandidate &a, const TrainingCandidate &b) {
                     if (a.possible != b.possible)
                       return a.possible;
                     if (!a.possible)
                       return false;
                     if (a.feasible != b.feasible)
                       return a.feasible;
                     if (!a.feasible)
                       return a.peakMemoryBytes() < b.peakMemoryBytes();
                     // Within 1%, fewer stages, micro-batches, then 1F1B
                     // (less memory for the same time).
                     if (std::fabs(a.stepSeconds - b.stepSeconds) >
                         0.01 * b.stepSeconds)
                       return a.stepSeconds < b.stepSeconds;
                     if (a.stages != b.stages)
                       return a.stages < b.stages;
                     if (a.microBatches != b.microBatches)
                       return a.microBatches < b.microBatches;
                     return a.schedule == "1f1b" && b.schedule != "1f1b";
                   });
  result_.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result_;
}

std::string ms(double seconds) {
  return llvm::formatv("{0:f2} ms", seconds * 1e3).str();
}

} // namespace

double TrainingCandidate::peakMemoryBytes() const {
  double peak = 0;
  for (double bytes : stageMemoryBytes)
    peak = std::max(peak, bytes);
  return peak;
}

std::string TrainingCandidate::label() const {
  std::string text;
  if (stages == 1)
    text = replicas == 1
               ? "one device"
               : "data parallelism, " + std::to_string(replicas) + " replicas";
  else
    text = "pipeline of " + std::to_string(stages) + " stages" +
           (replicas > 1 ? " x " + std::to_string(replicas) + " replicas" : "");
  if (microBatches > 1)
    text += ", " + std::to_string(microBatches) + " micro-batches";
  if (stages > 1)
    text += ", " + schedule;
  return text;
}

int64_t allReduceBucketBytes(const cm::LinkSpec &link, int64_t replicas) {
  // A ring's latency, 2 (r - 1) alpha, at most a tenth of its transfer,
  // 2 (r - 1) / r * bytes / beta.
  double bytes = 10.0 * double(std::max<int64_t>(replicas, 2)) *
                 link.latencySeconds * link.bytesPerSecond;
  return static_cast<int64_t>(
      std::clamp(bytes, double(1 << 20), double(128 << 20)));
}

FailureOr<TrainingSearchResult>
searchTrainingLayout(func::FuncOp func, const TrainingSearchOptions &options) {
  return TrainingSearch(func, options).run();
}

std::string oneDeviceNote(const TrainingSearchResult &r, size_t chosen) {
  if (chosen >= r.candidates.size() || r.oneDeviceSeconds <= 0 ||
      r.oneDeviceSeconds >= r.candidates[chosen].stepSeconds)
    return "";
  return "one device would be faster: a step predicted at " +
         ms(r.oneDeviceSeconds) + " against " +
         ms(r.candidates[chosen].stepSeconds) + " for " +
         r.candidates[chosen].label() +
         " (too little work to pay for splitting); --devices 1 uses one";
}

std::string explainTrainingSearch(const TrainingSearchResult &r, size_t chosen,
                                  const std::vector<std::string> &refusals) {
  std::string text;
  llvm::raw_string_ostream os(text);
  auto memory = [](const TrainingCandidate &c) {
    std::string list;
    for (double bytes : c.stageMemoryBytes)
      list += (list.empty() ? "" : ", ") + gib(bytes);
    return list;
  };
  auto line = [&](const TrainingCandidate &c) {
    os << c.label() << ": step " << ms(c.stepSeconds) << " (stages "
       << ms(c.computeSeconds) << " of which transfers "
       << ms(c.transferSeconds) << ", bubble " << ms(c.bubbleSeconds)
       << ", all-reduce not hidden " << ms(c.allReduceSeconds) << ", update "
       << ms(c.updateSeconds) << ", fixed " << ms(c.fixedSeconds)
       << "), memory per stage " << memory(c);
  };
  os << "training cost model (--strategy auto): " << r.candidates.size()
     << " layouts of the batch of " << r.batch << " over " << r.topology
     << ", searched in " << llvm::format("%.1f", r.searchSeconds * 1e3)
     << " ms; a step's work "
     << "taken as 3x the forward pass's\n";
  if (chosen < r.candidates.size()) {
    os << "  chosen: ";
    line(r.candidates[chosen]);
    os << "\n";
    if (std::string faster = oneDeviceNote(r, chosen); !faster.empty())
      os << "  " << faster << "\n";
  }
  for (size_t i = 0; i < refusals.size() && i < chosen; ++i) {
    os << "  refused by the compile (the exact memory check): ";
    line(r.candidates[i]);
    os << ": " << refusals[i] << "\n";
  }
  // The five next, then the best of every other split of the devices
  // (stages x replicas), so that each kind's best is there to compare.
  std::set<std::pair<int64_t, int64_t>> kinds;
  if (chosen < r.candidates.size())
    kinds.insert({r.candidates[chosen].stages, r.candidates[chosen].replicas});
  size_t shown = 0;
  for (size_t i = chosen + 1; i < r.candidates.size(); ++i) {
    const TrainingCandidate &c = r.candidates[i];
    if (!c.feasible)
      break;
    bool newKind = kinds.insert({c.stages, c.replicas}).second;
    if (shown >= 5 && !newKind)
      continue;
    os << "  runner-up: ";
    line(c);
    if (chosen < r.candidates.size() && r.candidates[chosen].stepSeconds > 0)
      os << llvm::format(" (%.2fx the chosen step)",
                         c.stepSeconds / r.candidates[chosen].stepSeconds);
    os << "\n";
    ++shown;
  }
  // The first few layouts that were out, then how many more.
  size_t out = 0, listed = 0;
  for (size_t i = 0; i < r.candidates.size(); ++i) {
    const TrainingCandidate &c = r.candidates[i];
    if (i == chosen || i < refusals.size() || c.feasible)
      continue;
    if (++out > 4)
      continue;
    ++listed;
    os << (c.possible ? "  estimated not to fit: " : "  not possible: ")
       << c.label() << ": " << c.whyNot << "\n";
  }
  if (out > listed)
    os << "  and " << out - listed << " more layouts that are out\n";
  return text;
}

} // namespace mlir::partc
