//===- PlacementSearch.cpp - Choose stages x replicas x micro-batches
//----------===//
//
// For every replica count R and micro-batch count M the op costs are
// evaluated at the micro-batch size batch/(R*M), and one dynamic program
// (compiler/CostModel/Partitioner) yields the best contiguous stage split
// for every stage count S <= N/R at once. A plan's step is the GPipe
// fill-drain time: sum of its stage times plus (M-1) times the slowest.
//
//===----------------------------------------------------------------------===//
#include "compiler/Placement/PlacementSearch.h"

#include <map>

#include "compiler/CostModel/Partitioner.h"
#include "compiler/Placement/BatchSplit.h"
#include "compiler/Utils/PassUtils.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>

namespace mlir::partc {

namespace cm = ::partc::costmodel;

std::string Candidate::label() const {
  std::string s =
      std::to_string(stages) + (stages == 1 ? " stage" : " stages") + " x " +
      std::to_string(replicas) + (replicas == 1 ? " replica" : " replicas");
  if (stages > 1)
    s += ", " + std::to_string(microBatches) +
         (microBatches == 1 ? " micro-batch" : " micro-batches");
  if (!slices.empty()) {
    s += ", slices ";
    for (size_t k = 0; k < slices.size(); ++k)
      s += (k ? "/" : "") + std::to_string(slices[k]);
  }
  return s;
}

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024;

double bytesOf(Type t) {
  return static_cast<double>(toTensorType(cast<ShapedType>(t)).byteSize());
}

} // namespace

Liveness analyzeLiveness(ArrayRef<Operation *> ops) {
  size_t n = ops.size();
  DenseMap<Operation *, size_t> index;
  for (size_t i = 0; i < n; ++i)
    index[ops[i]] = i;
  Liveness l;
  std::vector<double> cutDiff(n + 2, 0), liveDiff(n + 1, 0);
  for (size_t p = 0; p < n; ++p)
    for (Value v : ops[p]->getResults()) {
      size_t last = p;
      for (Operation *user : v.getUsers()) {
        auto it = index.find(user);
        if (it != index.end())
          last = std::max(last, it->second);
      }
      double b = bytesOf(v.getType());
      l.ranges.push_back({p, last});
      l.sizes.push_back(b);
      if (last > p) {
        cutDiff[p + 1] += b;
        cutDiff[last + 1] -= b;
      }
      liveDiff[p] += b;
      liveDiff[last + 1 > n ? n : last + 1] -= b;
    }
  l.cutBytes.assign(n + 1, 0);
  double acc = 0;
  for (size_t i = 0; i <= n; ++i) {
    acc += cutDiff[i];
    l.cutBytes[i] = acc;
  }
  l.liveBytes.assign(n, 0);
  acc = 0;
  for (size_t i = 0; i < n; ++i) {
    acc += liveDiff[i];
    l.liveBytes[i] = acc;
  }
  return l;
}

std::string gib(double bytes) {
  char buf[32];
  if (bytes >= GiB)
    std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / GiB);
  else if (bytes < 1024.0 * 1024)
    std::snprintf(buf, sizeof(buf), "%.2f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024));
  return buf;
}

namespace {

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024));
  return buf;
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", seconds * 1e3);
  return buf;
}

/// Fewest stages (devices) whose memory-greedy split fits: memory grows
/// monotonically with a stage, so greedy packing is optimal.
size_t minimalStagesForMemory(const cm::ChainProblem &p, double &heaviestOp) {
  size_t n = p.opSeconds.size(), stages = 0, begin = 0;
  heaviestOp = 0;
  for (size_t i = 0; i < n; ++i)
    heaviestOp = std::max(heaviestOp, cm::stageMemory(p, i, i + 1));
  if (heaviestOp > p.memoryBytes)
    return 0;
  while (begin < n) {
    size_t end = begin + 1;
    while (end < n && cm::stageMemory(p, begin, end + 1) <= p.memoryBytes)
      ++end;
    ++stages;
    begin = end;
  }
  return stages;
}

bool sameDevice(const cm::DeviceSpec &a, const cm::DeviceSpec &b) {
  return a.memoryBytes == b.memoryBytes &&
         a.matrixFlopsFp32 == b.matrixFlopsFp32 &&
         a.matrixFlopsTf32 == b.matrixFlopsTf32 &&
         a.matrixFlopsBf16 == b.matrixFlopsBf16 &&
         a.vectorFlops == b.vectorFlops &&
         a.memoryBytesPerSecond == b.memoryBytesPerSecond &&
         a.copyBytesPerSecond == b.copyBytesPerSecond &&
         a.launchSeconds == b.launchSeconds;
}

} // namespace

namespace {

/// One search over stages x replicas x micro-batches: the ops' costs and
/// live ranges, then every candidate costed, ranked and explained.
class PlacementSearch {
public:
  PlacementSearch(func::FuncOp func, const SearchOptions &options)
      : func_(func), options_(options), topo_(options.topology) {}

  FailureOr<SearchResult> run();

private:
  /// Fills result_.calibration from the cost table.
  void calibrate();
  /// Each op's seconds on `spec` for a slice of `images` of the batch.
  std::vector<double> opSecondsOn(const cm::DeviceSpec &spec,
                                  int64_t images) const;
  double replicaSeconds(const cm::DeviceSpec &spec, int64_t images) const;
  /// Images per replica given each replica's seconds for a slice of
  /// `images` (fitted as fixed + per image from 1 and `batch` images).
  /// Each replica takes at least `least` images.
  std::vector<int64_t>
  splitImages(size_t r, const std::function<double(size_t, int64_t)> &time,
              int64_t least = 1) const;
  /// Replicas on unlike devices: a faster device takes more images. Each
  /// replica's time is close to linear in its images (fixed costs plus a
  /// per-image cost), so images go one at a time to the replica that would
  /// finish soonest; the result is then costed exactly and kept if it beats
  /// equal slices (and fits every device's memory).
  void balanceReplicas(Candidate &c) const;
  /// Pipelined replicas on unlike devices: each replica is a pipeline over
  /// its own devices with the candidate's cuts, and its period is its
  /// slowest stage (for its largest micro-batch) once per micro-batch; a
  /// faster chain takes more images. Kept if the slowest replica then beats
  /// the equal split and every stage fits.
  void balanceHybrid(Candidate &c, const cm::ChainProblem &base) const;
  /// Requests that cannot be met get their own message.
  LogicalResult checkRequests() const;
  /// The chain problem of micro-batches of `slice` images, `m` per batch.
  cm::ChainProblem chainProblem(int64_t slice, int64_t m) const;
  /// Chains of unlike devices: each stage is costed by the slowest of the
  /// devices it runs on (one per replica) and its memory bounded by the
  /// smallest.
  cm::ChainProblem mixedProblem(const cm::ChainProblem &p, const Candidate &c,
                                int64_t slice) const;
  /// Fills in a feasible candidate's times and stage reports from its cut.
  void costCandidate(Candidate &c, const cm::StageCut &cut,
                     const cm::ChainProblem &p, const cm::ChainProblem &used,
                     double fraction) const;
  /// Every stage count for R replicas and M micro-batches.
  void searchStages(int64_t r, int64_t m);
  void rank();
  /// Why nothing fits, with the device count that would.
  LogicalResult explainFailure();

  func::FuncOp func_;
  const SearchOptions &options_;
  const cm::Topology &topo_;
  SmallVector<Operation *> ops_;
  size_t n_ = 0;
  BatchInfo batchInfo_;
  int64_t batch_ = 1;
  std::vector<cm::OpWork> work_;
  Liveness live_;
  /// Plans are costed by the weakest device, except pipelines on a mixed
  /// machine (each stage by the slowest of its devices) and replicas on one,
  /// pure or pipelined (unequal slices).
  cm::DeviceSpec device_;
  bool mixed_ = false;
  double fullLive_ = 0, weights_ = 0;
  SearchResult result_;
  cm::ChainProblem lastProblem_;
};

std::vector<double> PlacementSearch::opSecondsOn(const cm::DeviceSpec &spec,
                                                 int64_t images) const {
  std::vector<double> seconds;
  for (const cm::OpWork &w : work_)
    seconds.push_back(
        cm::predictSeconds(w, static_cast<double>(images) / batch_, spec,
                           topo_.tf32, options_.costTable, batch_, images));
  return seconds;
}

double PlacementSearch::replicaSeconds(const cm::DeviceSpec &spec,
                                       int64_t images) const {
  double t = 0;
  for (double seconds : opSecondsOn(spec, images))
    t += seconds;
  return t;
}

std::vector<int64_t>
PlacementSearch::splitImages(size_t r,
                             const std::function<double(size_t, int64_t)> &time,
                             int64_t least) const {
  int64_t batch = batch_;
  std::vector<double> fixed(r), perImage(r);
  std::vector<int64_t> sizes(r, least);
  for (size_t k = 0; k < r; ++k) {
    double one = time(k, 1), all = time(k, batch);
    perImage[k] = batch > 1 ? (all - one) / (batch - 1) : all;
    fixed[k] = one - perImage[k];
  }
  for (int64_t left = batch - least * static_cast<int64_t>(r); left > 0;
       --left) {
    size_t pick = 0;
    for (size_t k = 1; k < r; ++k)
      if (fixed[k] + perImage[k] * (sizes[k] + 1) <
          fixed[pick] + perImage[pick] * (sizes[pick] + 1))
        pick = k;
    ++sizes[pick];
  }
  return sizes;
}

void PlacementSearch::balanceReplicas(Candidate &c) const {
  const cm::Topology &topo = topo_;
  int64_t batch = batch_;
  size_t r = static_cast<size_t>(c.replicas);
  std::vector<int64_t> sizes = splitImages(r, [&](size_t k, int64_t images) {
    return replicaSeconds(topo.devices[c.device(k, 0)], images);
  });
  std::vector<double> seconds, memory;
  double slowest = 0;
  for (size_t k = 0; k < r; ++k) {
    const cm::DeviceSpec &spec = topo.devices[c.device(k, 0)];
    memory.push_back(weights_ + fullLive_ * sizes[k] / batch);
    if (memory.back() > spec.memoryBytes)
      return;
    seconds.push_back(replicaSeconds(spec, sizes[k]));
    slowest = std::max(slowest, seconds.back());
  }
  if (slowest >= c.periodSeconds)
    return;
  c.slices = sizes;
  c.replicaSeconds = seconds;
  c.replicaMemoryBytes = memory;
  c.stepSeconds = c.periodSeconds = c.slowestSeconds = slowest;
  c.throughput = batch / slowest;
}

void PlacementSearch::balanceHybrid(Candidate &c,
                                    const cm::ChainProblem &base) const {
  const cm::Topology &topo = topo_;
  int64_t batch = batch_;
  size_t n = n_;
  const Liveness &live = live_;
  size_t r = static_cast<size_t>(c.replicas);
  size_t s = static_cast<size_t>(c.stages);
  int64_t m = c.microBatches;
  std::vector<size_t> bounds = {0};
  bounds.insert(bounds.end(), c.cuts.begin(), c.cuts.end());
  bounds.push_back(n);
  // Replica k's chain for micro-batches of `images`, stage j on its j-th
  // device.
  auto chainOf = [&](size_t k, int64_t images) {
    cm::ChainProblem q = base;
    double fraction = static_cast<double>(images) / batch;
    q.liveBytes.clear();
    for (double b : live.liveBytes)
      q.liveBytes.push_back(b * fraction);
    q.cutBytes.clear();
    for (double b : live.cutBytes)
      q.cutBytes.push_back(b * fraction);
    q.stageClasses.assign(s, {});
    q.classOpSeconds.clear();
    q.classMemoryBytes.clear();
    for (size_t j = 0; j < s; ++j) {
      const cm::DeviceSpec &spec = topo.devices[c.device(k, j)];
      q.classOpSeconds.push_back(opSecondsOn(spec, images));
      q.classMemoryBytes.push_back(spec.memoryBytes);
      q.stageClasses[j] = {j};
    }
    return q;
  };
  auto largestMicroBatch = [m](int64_t images) { return (images + m - 1) / m; };
  auto period = [&](const cm::ChainProblem &q) {
    double slowest = 0;
    for (size_t j = 0; j < s; ++j)
      slowest =
          std::max(slowest, cm::stageSeconds(q, bounds[j], bounds[j + 1], j));
    return slowest;
  };
  std::vector<int64_t> sizes = splitImages(
      r,
      [&](size_t k, int64_t images) {
        return m * period(chainOf(k, largestMicroBatch(images)));
      },
      m);
  std::vector<std::vector<double>> seconds(r), memory(r);
  double periodSeconds = 0, step = 0, bubble = 0;
  for (size_t k = 0; k < r; ++k) {
    cm::ChainProblem q = chainOf(k, largestMicroBatch(sizes[k]));
    cm::ChainProblem serial = q;
    serial.overlapTransfers = false;
    double sum = 0, serialSlowest = 0, slowest = 0;
    for (size_t j = 0; j < s; ++j) {
      memory[k].push_back(cm::stageMemory(q, bounds[j], bounds[j + 1]));
      if (memory[k].back() > cm::stageCapacity(q, j))
        return;
      seconds[k].push_back(cm::stageSeconds(q, bounds[j], bounds[j + 1], j));
      slowest = std::max(slowest, seconds[k].back());
      double t = cm::stageSeconds(serial, bounds[j], bounds[j + 1], j);
      sum += t;
      serialSlowest = std::max(serialSlowest, t);
    }
    periodSeconds = std::max(periodSeconds, m * slowest);
    double replicaStep = sum + (m - 1) * serialSlowest;
    if (replicaStep > step) {
      step = replicaStep;
      bubble = 1.0 - (m * sum) / (s * replicaStep);
    }
  }
  if (periodSeconds >= c.periodSeconds)
    return;
  // Slice rep * m + j is micro-batch j of replica rep (applyPlacement).
  c.slices.clear();
  for (size_t k = 0; k < r; ++k)
    for (int64_t j = 0; j < m; ++j)
      c.slices.push_back(sizes[k] / m + (j < sizes[k] % m ? 1 : 0));
  c.replicaStageSeconds = std::move(seconds);
  c.replicaStageMemoryBytes = std::move(memory);
  c.slowestSeconds = periodSeconds / m;
  c.periodSeconds = periodSeconds;
  c.stepSeconds = step;
  c.bubble = bubble;
  c.throughput = batch / periodSeconds;
}

LogicalResult PlacementSearch::checkRequests() const {
  const SearchOptions &options = options_;
  size_t n = n_;
  func::FuncOp func = func_;
  // Requests that cannot be met get their own message.
  if (options.stages > static_cast<int64_t>(std::max<size_t>(n, 1)) &&
      options.stages > 1)
    return func.emitError()
               << "cannot split " << n << " op(s) over " << options.stages
               << " devices; use at most as many devices as ops "
                  "or the data-parallel strategy",
           failure();
  int64_t parts = std::max<int64_t>(options.replicas, 1) *
                  std::max<int64_t>(options.microBatches, 1);
  if (parts > 1 && !batchInfo_.splittable)
    return func.emitError()
               << (options.replicas > 1 ? "data parallelism" : "pipelining")
               << " needs ops that treat samples independently; "
               << batchInfo_.why
               << ", so the model cannot be split along the batch; use the "
                  "single or pipeline strategy with one micro-batch",
           failure();
  if (parts > batch_)
    return func.emitError()
               << "batch " << batch_ << " is smaller than " << parts
               << " parts; raise --batch or use fewer parts",
           failure();

  return success();
}

cm::ChainProblem PlacementSearch::chainProblem(int64_t slice, int64_t m) const {
  double fraction = static_cast<double>(slice) / batch_;
  cm::ChainProblem p;
  p.opSeconds = opSecondsOn(device_, slice);
  for (size_t i = 0; i < n_; ++i) {
    p.opWeightBytes.push_back(work_[i].weightBytes);
    p.liveBytes.push_back(live_.liveBytes[i] * fraction);
  }
  for (double b : live_.cutBytes)
    p.cutBytes.push_back(b * fraction);
  p.memoryBytes = topo_.smallestMemory();
  // Ranked by the streamed period, a stage's transfers overlap the stages'
  // compute (partc-run --stream); for one batch they do not.
  p.overlapTransfers = options_.objective != "latency";
  p.localBytesPerSecond = device_.copyBytesPerSecond;
  // Double-buffered transfers keep up to two micro-batches in flight.
  p.inFlight = std::min<int64_t>(m, 2);
  return p;
}

cm::ChainProblem PlacementSearch::mixedProblem(const cm::ChainProblem &p,
                                               const Candidate &c,
                                               int64_t slice) const {
  const cm::Topology &topo = topo_;
  int64_t r = c.replicas, s = c.stages;
  // Chains of unlike devices: each stage is costed by the slowest
  // of the devices it runs on (one per replica) and its memory
  // bounded by the smallest.
  cm::ChainProblem q = p;
  std::vector<size_t> classDevice; // a device of each class
  q.stageClasses.resize(static_cast<size_t>(s));
  for (int64_t rep = 0; rep < r; ++rep)
    for (int64_t k = 0; k < s; ++k) {
      size_t device = c.devices[rep * s + k];
      const cm::DeviceSpec &spec = topo.devices[device];
      size_t cls = 0;
      while (cls < classDevice.size() &&
             !sameDevice(topo.devices[classDevice[cls]], spec))
        ++cls;
      if (cls == classDevice.size()) {
        classDevice.push_back(device);
        q.classOpSeconds.push_back(opSecondsOn(spec, slice));
        q.classMemoryBytes.push_back(spec.memoryBytes);
      }
      q.stageClasses[k].push_back(cls);
    }
  return q;
}

void PlacementSearch::costCandidate(Candidate &c, const cm::StageCut &cut,
                                    const cm::ChainProblem &p,
                                    const cm::ChainProblem &used,
                                    double fraction) const {
  int64_t m = c.microBatches, s = c.stages;
  size_t n = n_;
  int64_t batch = batch_;
  const Liveness &live = live_;
  c.feasible = true;
  c.cuts = cut.cuts;
  c.slowestSeconds = cut.slowest;
  // One batch alone: every stage receives, then computes.
  cm::ChainProblem serial = used;
  serial.overlapTransfers = false;
  std::vector<size_t> bounds = {0};
  bounds.insert(bounds.end(), cut.cuts.begin(), cut.cuts.end());
  bounds.push_back(n);
  double sum = 0, serialSlowest = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    double t = cm::stageSeconds(serial, bounds[k], bounds[k + 1], k);
    sum += t;
    serialSlowest = std::max(serialSlowest, t);
  }
  c.stepSeconds = sum + (m - 1) * serialSlowest;
  // Streaming, the next batch enters stage 0 as soon as it is free:
  // every stage is busy m slowest-stage slots per batch.
  c.periodSeconds = m * cut.slowest;
  c.throughput = batch / c.periodSeconds;
  c.bubble = c.stepSeconds > 0 ? 1.0 - (m * sum) / (s * c.stepSeconds) : 0.0;
  std::vector<size_t> starts = {0};
  starts.insert(starts.end(), cut.cuts.begin(), cut.cuts.end());
  for (size_t k = 0; k < starts.size(); ++k) {
    StageReport rep;
    rep.firstOp = starts[k];
    rep.endOp = k + 1 < starts.size() ? starts[k + 1] : n;
    rep.seconds = cut.stageSeconds[k];
    rep.memoryBytes = cm::stageMemory(p, rep.firstOp, rep.endOp);
    for (size_t i = rep.firstOp; i < rep.endOp; ++i)
      rep.weightBytes += p.opWeightBytes[i];
    rep.receivedBytes = k ? p.cutBytes[rep.firstOp] * m : 0;
    for (size_t v = 0; v < live.ranges.size(); ++v)
      if (live.ranges[v].first >= rep.firstOp &&
          live.ranges[v].first < rep.endOp &&
          live.ranges[v].second >= rep.endOp)
        rep.sentBytes += live.sizes[v] * fraction * m;
    c.stageReports.push_back(rep);
  }
}

void PlacementSearch::searchStages(int64_t r, int64_t m) {
  int64_t maxStages = static_cast<int64_t>(topo_.size()) / r;
  int64_t slice = (batch_ + r * m - 1) / (r * m);
  double fraction = static_cast<double>(slice) / batch_;
  cm::ChainProblem p = chainProblem(slice, m);
  lastProblem_ = p;
  // One solution per distinct link speed (the stage count decides which
  // devices form each replica's chain, hence its slowest link).
  std::map<std::pair<double, double>, std::vector<cm::StageCut>> solved;
  for (int64_t s = 1; s <= maxStages; ++s) {
    if (options_.stages && s != options_.stages)
      continue;
    if (s == 1 && m > 1)
      continue;
    Candidate c;
    c.stages = s;
    c.replicas = r;
    c.microBatches = m;
    c.devices = topo_.chainGroups(r, s);
    cm::LinkSpec link = topo_.slowestChainLink(c.devices, s);
    p.linkBytesPerSecond = link.bytesPerSecond;
    p.linkLatencySeconds = link.latencySeconds;
    std::vector<cm::StageCut> mixedCuts;
    cm::ChainProblem q;
    if (s > 1 && mixed_) {
      q = mixedProblem(p, c, slice);
      mixedCuts = cm::solveChain(q, static_cast<size_t>(s));
    }
    const cm::ChainProblem &used = mixedCuts.empty() ? p : q;
    auto key = std::make_pair(link.bytesPerSecond, link.latencySeconds);
    auto found = solved.find(key);
    if (mixedCuts.empty() && found == solved.end())
      found = solved.emplace(key, cm::solveChain(p, maxStages)).first;
    const std::vector<cm::StageCut> &cuts =
        mixedCuts.empty() ? found->second : mixedCuts;
    if (s > static_cast<int64_t>(n_)) {
      c.whyNot = "more stages than ops";
      result_.candidates.push_back(c);
      continue;
    }
    const cm::StageCut &cut = cuts[s];
    if (!cut.feasible) {
      c.whyNot = "does not fit in " + gib(p.memoryBytes) + " per device";
      result_.candidates.push_back(c);
      continue;
    }
    costCandidate(c, cut, p, used, fraction);
    if (mixed_ && s == 1 && r > 1 && m == 1)
      balanceReplicas(c);
    if (mixed_ && s > 1 && r > 1)
      balanceHybrid(c, used);
    result_.candidates.push_back(c);
  }
}

void PlacementSearch::rank() {
  const SearchOptions &options = options_;
  SearchResult &result = result_;
  bool latency = options.objective == "latency";
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [&](const Candidate &a, const Candidate &b) {
                     if (a.feasible != b.feasible)
                       return a.feasible;
                     if (!a.feasible)
                       return false;
                     double ka = latency ? a.stepSeconds : a.periodSeconds;
                     double kb = latency ? b.stepSeconds : b.periodSeconds;
                     // Within 0.5%, prefer fewer devices, stages and
                     // micro-batches.
                     if (std::fabs(ka - kb) > 0.005 * std::fabs(kb))
                       return ka < kb;
                     if (a.stages * a.replicas != b.stages * b.replicas)
                       return a.stages * a.replicas < b.stages * b.replicas;
                     if (a.stages != b.stages)
                       return a.stages < b.stages;
                     return a.microBatches < b.microBatches;
                   });
}

LogicalResult PlacementSearch::explainFailure() {
  const SearchOptions &options = options_;
  func::FuncOp func = func_;
  size_t n = n_;
  int64_t numDevices = static_cast<int64_t>(topo_.size());
  cm::ChainProblem &lastProblem = lastProblem_;
  if (!batchInfo_.splittable &&
      (options.replicas > 1 || options.microBatches > 1))
    return func.emitError()
               << "the model cannot be split along its batch: "
               << batchInfo_.why << "; use a pipeline with one micro-batch",
           failure();
  double heaviestOp = 0;
  lastProblem.inFlight = 1;
  size_t needed = minimalStagesForMemory(lastProblem, heaviestOp);
  if (needed == 0)
    return func.emitError()
               << "one op needs " << gib(heaviestOp) << " but each device has "
               << gib(lastProblem.memoryBytes)
               << "; no split across devices can fit this model",
           failure();
  // The heaviest stage of the best memory split over the devices given.
  double lo = 0, hi = 0;
  for (size_t i = 0; i < n; ++i)
    hi += lastProblem.opWeightBytes[i] + lastProblem.liveBytes[i];
  cm::ChainProblem q = lastProblem;
  for (int iter = 0; iter < 60; ++iter) {
    q.memoryBytes = (lo + hi) / 2;
    double unused;
    size_t k = minimalStagesForMemory(q, unused);
    if (k != 0 && static_cast<int64_t>(k) <= numDevices)
      hi = q.memoryBytes;
    else
      lo = q.memoryBytes;
  }
  return func.emitError() << "the model does not fit: split over " << numDevices
                          << " device(s), the heaviest stage needs " << gib(hi)
                          << " but each device has "
                          << gib(lastProblem.memoryBytes) << "; use --devices "
                          << needed << " or more",
         failure();
}

void PlacementSearch::calibrate() {
  std::map<std::string, OpKindCalibration> byOp;
  for (size_t i = 0; i < n_; ++i) {
    const cm::OpWork &w = work_[i];
    if (w.cls == cm::OpClass::View)
      continue;
    OpKindCalibration &c = byOp[ops_[i]->getName().stripDialect().str()];
    ++c.kernels;
    const double *measured = options_.costTable->lookup(w.signature);
    if (!measured)
      continue;
    // As the calibrated prediction charges it: with the gap to the next
    // kernel, which the roofline's launch cost includes.
    ++c.measured;
    c.measuredSeconds += *measured + device_.kernelGapSeconds;
    c.rooflineSeconds +=
        cm::predictSeconds(w, 1.0, device_, topo_.tf32, nullptr);
  }
  for (auto &[op, c] : byOp) {
    c.op = op;
    result_.calibration.push_back(c);
  }
  llvm::stable_sort(result_.calibration,
                    [](const OpKindCalibration &a, const OpKindCalibration &b) {
                      return std::abs(a.rooflineSeconds - a.measuredSeconds) >
                             std::abs(b.rooflineSeconds - b.measuredSeconds);
                    });
}

FailureOr<SearchResult> PlacementSearch::run() {
  auto start = std::chrono::steady_clock::now();
  for (Operation &op : func_.getBody().front())
    if (!isa<graph::ConstantOp, func::ReturnOp>(op))
      ops_.push_back(&op);
  n_ = ops_.size();
  batchInfo_ = analyzeBatch(func_);
  batch_ = std::max<int64_t>(batchInfo_.batch, 1);
  for (Operation *op : ops_)
    work_.push_back(cm::analyzeOp(op, batchInfo_.batchedOps.contains(op),
                                  options_.fusedAttention));
  live_ = analyzeLiveness(ops_);
  device_ = topo_.weakest();
  for (const cm::DeviceSpec &d : topo_.devices)
    mixed_ = mixed_ || !sameDevice(d, topo_.devices[0]);
  for (double bytes : live_.liveBytes)
    fullLive_ = std::max(fullLive_, bytes);
  for (const cm::OpWork &w : work_)
    weights_ += w.weightBytes;
  if (failed(checkRequests()))
    return failure();
  if (options_.costTable)
    calibrate();

  result_.batch = batch_;
  result_.ops = n_;
  result_.topology = topo_.describe();
  result_.objective = options_.objective;
  if (n_ == 0) {
    // Everything folded to constants: one device copies them out.
    Candidate c;
    c.feasible = true;
    c.stageReports.push_back(StageReport());
    result_.candidates.push_back(c);
    result_.best = c;
    return result_;
  }
  int64_t numDevices = static_cast<int64_t>(topo_.size());
  for (int64_t r = 1; r <= numDevices; ++r) {
    if (options_.replicas && r != options_.replicas)
      continue;
    if (r > 1 && (!batchInfo_.splittable || r > batch_))
      continue;
    int64_t maxStages = numDevices / r;
    for (int64_t m : {1, 2, 4, 8, 16, 32, 64}) {
      if (options_.microBatches && m != options_.microBatches)
        continue;
      if (m > 1 && (!batchInfo_.splittable || r * m > batch_ || maxStages < 2))
        continue;
      searchStages(r, m);
    }
  }
  rank();
  result_.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // One device has one plan; a training step's memory is then judged by
  // partc-report-step-memory, which counts what the step keeps (this
  // search's estimate is an inference one).
  bool trainingStep = llvm::any_of(
      ops_, [](Operation *op) { return isa<graph::VariableOp>(op); });
  if (trainingStep && numDevices == 1 && !result_.candidates.empty()) {
    Candidate &only = result_.candidates.front();
    // Refused by the inference estimate before it was costed: the whole
    // graph is its one stage.
    if (only.stageReports.empty()) {
      StageReport all;
      all.endOp = n_;
      all.memoryBytes = fullLive_ + weights_;
      all.weightBytes = weights_;
      only.stageReports.push_back(all);
      only.whyNot.clear();
    }
    only.feasible = true;
  }
  if (result_.candidates.empty() || !result_.candidates.front().feasible)
    return explainFailure();
  result_.best = result_.candidates.front();
  return result_;
}

} // namespace

FailureOr<SearchResult> searchPlacement(func::FuncOp func,
                                        const SearchOptions &options) {
  return PlacementSearch(func, options).run();
}

LogicalResult applyPlacement(ModuleOp module, func::FuncOp func,
                             const Candidate &plan) {
  SmallVector<Operation *> ops;
  for (Operation &op : func.getBody().front())
    if (!isa<graph::ConstantOp, func::ReturnOp>(op))
      ops.push_back(&op);
  size_t stage = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    while (stage < plan.cuts.size() && i >= plan.cuts[stage])
      ++stage;
    graph::setDevice(ops[i], stage);
  }
  int64_t s = plan.stages, m = plan.microBatches;
  setNumDevices(module, s * plan.replicas);
  // Stage k of replica r runs on devices[r * S + k].
  auto physical = [&](int64_t slot) {
    return slot < static_cast<int64_t>(plan.devices.size())
               ? static_cast<int64_t>(plan.devices[slot])
               : slot;
  };
  int64_t parts = plan.replicas * m;
  if (parts == 1) {
    for (Operation *op : ops)
      graph::setDevice(op, physical(*graph::getDevice(op)));
    return success();
  }
  auto deviceOf = [s, m, physical](int64_t slice, Operation *op) {
    return physical((slice / m) * s + *graph::getDevice(op));
  };
  std::function<int64_t(int64_t)> microBatchOf;
  if (m > 1)
    microBatchOf = [m](int64_t slice) { return slice % m; };
  return splitBatch(func, parts, "the chosen plan", deviceOf, microBatchOf,
                    plan.slices);
}

std::string explainText(const SearchResult &r) {
  std::string out;
  llvm::raw_string_ostream os(out);
  const Candidate &b = r.best;
  os << "partc plan: " << r.ops << " ops, batch " << r.batch << ", on "
     << r.topology << ", objective " << r.objective << "\n";
  os << "chosen: " << b.label() << "; predicted step " << ms(b.stepSeconds)
     << " (one batch), period " << ms(b.periodSeconds)
     << " per batch streamed, " << llvm::format("%.0f", b.throughput)
     << " samples/s, bubble " << llvm::format("%.1f%%", b.bubble * 100) << "\n";
  os << llvm::format("  %-6s %-5s %-7s %5s %12s %12s %12s %12s %12s\n",
                     "device", "stage", "replica", "ops", "params", "peak mem",
                     "time/mb", "received", "sent");
  for (int64_t rep = 0; rep < b.replicas; ++rep)
    for (int64_t s = 0; s < b.stages; ++s) {
      const StageReport &st = b.stageReports[s];
      os << llvm::format(
          "  %-6lld %-5lld %-7lld %5zu %12s %12s %12s %12s %12s\n",
          (long long)b.device(rep, s), (long long)s, (long long)rep,
          st.endOp - st.firstOp, mib(st.weightBytes).c_str(),
          mib(rep < static_cast<int64_t>(b.replicaStageMemoryBytes.size())
                  ? b.replicaStageMemoryBytes[rep][s]
              : rep < static_cast<int64_t>(b.replicaMemoryBytes.size())
                  ? b.replicaMemoryBytes[rep]
                  : st.memoryBytes)
              .c_str(),
          ms(rep < static_cast<int64_t>(b.replicaStageSeconds.size())
                 ? b.replicaStageSeconds[rep][s]
             : rep < static_cast<int64_t>(b.replicaSeconds.size())
                 ? b.replicaSeconds[rep]
                 : st.seconds)
              .c_str(),
          mib(st.receivedBytes).c_str(), mib(st.sentBytes).c_str());
    }
  os << "runner-up plans:\n";
  size_t shown = 0;
  for (size_t i = 1; i < r.candidates.size() && shown < 6; ++i, ++shown) {
    const Candidate &c = r.candidates[i];
    os << "  " << c.label() << ": ";
    if (!c.feasible) {
      os << c.whyNot << "\n";
      continue;
    }
    // Compared on what the objective ranks by.
    bool latency = r.objective == "latency";
    double mine = latency ? c.stepSeconds : c.periodSeconds;
    double chosen = latency ? b.stepSeconds : b.periodSeconds;
    os << "step " << ms(c.stepSeconds) << ", period " << ms(c.periodSeconds)
       << " (" << llvm::format("%.2fx", chosen > 0 ? mine / chosen : 1.0)
       << " the chosen " << (latency ? "step" : "period") << "), bubble "
       << llvm::format("%.1f%%", c.bubble * 100);
    if (mine <= chosen * 1.005)
      os << "; as fast, but uses more devices, stages or micro-batches";
    os << "\n";
  }
  os << "searched " << r.candidates.size() << " plans in "
     << llvm::format("%.1f", r.searchSeconds * 1e3) << " ms\n";
  if (!r.calibration.empty()) {
    // What the cost table corrected: where the uncalibrated model is off.
    int64_t kernels = 0, measured = 0;
    double roofline = 0, time = 0;
    for (const OpKindCalibration &c : r.calibration) {
      kernels += c.kernels;
      measured += c.measured;
      roofline += c.rooflineSeconds;
      time += c.measuredSeconds;
    }
    os << "cost table: " << measured << " of " << kernels
       << " kernels measured, " << ms(time)
       << " with the gaps between them, against " << ms(roofline)
       << " predicted without it; by op, largest difference first:\n";
    os << llvm::format("  %-24s %7s %12s %12s %7s\n", "op", "kernels",
                       "measured", "predicted", "ratio");
    for (const OpKindCalibration &c : r.calibration) {
      if (!c.measured)
        continue;
      os << llvm::format(
          "  %-24s %3lld/%-3lld %12s %12s %6.2fx\n", c.op.c_str(),
          (long long)c.measured, (long long)c.kernels,
          ms(c.measuredSeconds).c_str(), ms(c.rooflineSeconds).c_str(),
          c.measuredSeconds > 0 ? c.rooflineSeconds / c.measuredSeconds : 0.0);
    }
  }
  return out;
}

std::string explainJson(const SearchResult &r) {
  auto candidate = [&](const Candidate &c) {
    llvm::json::Object o{{"stages", c.stages},
                         {"replicas", c.replicas},
                         {"micro_batches", c.microBatches},
                         {"feasible", c.feasible}};
    if (!c.feasible) {
      o["why_not"] = c.whyNot;
      return o;
    }
    o["step_ms"] = c.stepSeconds * 1e3;
    o["period_ms"] = c.periodSeconds * 1e3;
    o["throughput"] = c.throughput;
    o["bubble"] = c.bubble;
    llvm::json::Array stages;
    for (const StageReport &s : c.stageReports)
      stages.push_back(
          llvm::json::Object{{"first_op", static_cast<int64_t>(s.firstOp)},
                             {"ops", static_cast<int64_t>(s.endOp - s.firstOp)},
                             {"seconds_per_micro_batch", s.seconds},
                             {"param_bytes", s.weightBytes},
                             {"peak_memory_bytes", s.memoryBytes},
                             {"received_bytes", s.receivedBytes},
                             {"sent_bytes", s.sentBytes}});
    o["stages_detail"] = std::move(stages);
    llvm::json::Array devices;
    for (size_t d : c.devices)
      devices.push_back(static_cast<int64_t>(d));
    o["devices"] = std::move(devices);
    if (!c.slices.empty()) {
      llvm::json::Array slices;
      for (int64_t n : c.slices)
        slices.push_back(n);
      o["slices"] = std::move(slices);
    }
    // Unequal replicas: each one's predicted seconds per stage (or for the
    // whole replica when it has one stage).
    auto perReplica = [](const std::vector<double> &values) {
      llvm::json::Array a;
      for (double v : values)
        a.push_back(v * 1e3);
      return a;
    };
    if (!c.replicaStageSeconds.empty()) {
      llvm::json::Array replicas;
      for (const std::vector<double> &stages : c.replicaStageSeconds)
        replicas.push_back(perReplica(stages));
      o["replica_stage_ms"] = std::move(replicas);
    } else if (!c.replicaSeconds.empty()) {
      o["replica_ms"] = perReplica(c.replicaSeconds);
    }
    return o;
  };
  llvm::json::Array others;
  for (size_t i = 1; i < r.candidates.size(); ++i)
    others.push_back(candidate(r.candidates[i]));
  llvm::json::Object root{{"ops", static_cast<int64_t>(r.ops)},
                          {"batch", r.batch},
                          {"topology", r.topology},
                          {"objective", r.objective},
                          {"search_ms", r.searchSeconds * 1e3},
                          {"chosen", candidate(r.best)},
                          {"runners_up", std::move(others)}};
  std::string out;
  llvm::raw_string_ostream os(out);
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(root))) << "\n";
  return out;
}

} // namespace mlir::partc
