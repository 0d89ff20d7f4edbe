//===- Partitioner.cpp - Optimal contiguous pipeline stages ---------------===//
#include "compiler/CostModel/Partitioner.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

namespace partc::costmodel {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Device classes of the `stage`-th stage's devices, sorted and unique: 0
/// for the default devices, c + 1 for ChainProblem class c.
std::vector<size_t> classKeys(const ChainProblem &p, size_t stage) {
  std::vector<size_t> keys;
  if (stage < p.stageClasses.size())
    for (size_t c : p.stageClasses[stage])
      keys.push_back(c + 1);
  if (keys.empty())
    keys.push_back(0);
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

const std::vector<double> &opSecondsOf(const ChainProblem &p, size_t key) {
  return key ? p.classOpSeconds[key - 1] : p.opSeconds;
}

struct Prefix {
  std::vector<double> seconds, weights;
  Prefix(const ChainProblem &p, const std::vector<double> &ops) {
    size_t n = ops.size();
    seconds.assign(n + 1, 0);
    weights.assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      seconds[i + 1] = seconds[i] + ops[i];
      weights[i + 1] =
          weights[i] + (i < p.opWeightBytes.size() ? p.opWeightBytes[i] : 0);
    }
  }
};

/// Bytes crossing cut `cut` between two stages (none at either end).
double crossingBytes(const ChainProblem &p, size_t cut) {
  if (cut == 0 || cut >= p.opSeconds.size() || cut >= p.cutBytes.size())
    return 0;
  return std::max(0.0, p.cutBytes[cut]);
}

double receiveSeconds(const ChainProblem &p, size_t cut) {
  double bytes = crossingBytes(p, cut);
  return bytes > 0 ? bytes / p.linkBytesPerSecond + p.linkLatencySeconds : 0;
}

/// Time of stage [begin, end) whose ops take `compute` seconds.
double combine(const ChainProblem &p, size_t begin, size_t end,
               double compute) {
  double receive = receiveSeconds(p, begin);
  if (!p.overlapTransfers)
    return receive + compute;
  double in = crossingBytes(p, begin), out = crossingBytes(p, end);
  double copies = (in + out) / p.localBytesPerSecond;
  return std::max(compute + copies, receive);
}
} // namespace

double stageSeconds(const ChainProblem &p, size_t begin, size_t end,
                    size_t stage) {
  double compute = 0;
  for (size_t key : classKeys(p, stage)) {
    const std::vector<double> &ops = opSecondsOf(p, key);
    double sum = 0;
    for (size_t i = begin; i < end; ++i)
      sum += ops[i];
    compute = std::max(compute, sum);
  }
  return combine(p, begin, end, compute);
}

double stageCapacity(const ChainProblem &p, size_t stage) {
  double capacity = std::numeric_limits<double>::infinity();
  for (size_t key : classKeys(p, stage))
    capacity =
        std::min(capacity, key ? p.classMemoryBytes[key - 1] : p.memoryBytes);
  return capacity;
}

double stageMemory(const ChainProblem &p, size_t begin, size_t end) {
  double weights = 0, live = begin < p.cutBytes.size() ? p.cutBytes[begin] : 0;
  for (size_t i = begin; i < end; ++i) {
    weights += i < p.opWeightBytes.size() ? p.opWeightBytes[i] : 0;
    live = std::max(live, i < p.liveBytes.size() ? p.liveBytes[i] : 0.0);
  }
  return weights + live * p.inFlight;
}

std::vector<StageCut> solveChain(const ChainProblem &p, size_t maxStages) {
  size_t n = p.opSeconds.size();
  std::vector<StageCut> result(maxStages + 1);
  if (n == 0)
    return result;
  size_t S = std::min(maxStages, n);
  // best[k][i]: smallest slowest-stage time for ops [0, i) in k stages.
  std::vector<std::vector<double>> best(S + 1,
                                        std::vector<double>(n + 1, kInf));
  std::vector<std::vector<uint32_t>> from(S + 1,
                                          std::vector<uint32_t>(n + 1, 0));
  // Stage cost and feasibility of [j, i) on each set of device classes that
  // some stage runs on, cached per (j, i).
  using Costs = std::vector<std::vector<float>>;
  std::map<std::vector<size_t>, Costs> costs;
  for (size_t k = 0; k < S; ++k) {
    std::vector<size_t> keys = classKeys(p, k);
    if (costs.count(keys))
      continue;
    Costs &cost = costs[keys];
    std::vector<Prefix> pres;
    for (size_t key : keys)
      pres.emplace_back(p, opSecondsOf(p, key));
    // Weights are the same on every class.
    const Prefix &pre = pres.front();
    double capacity = stageCapacity(p, k);
    cost.resize(n + 1);
    for (size_t j = 0; j < n; ++j) {
      cost[j].assign(n + 1, static_cast<float>(kInf));
      double live = j < p.cutBytes.size() ? p.cutBytes[j] : 0;
      for (size_t i = j + 1; i <= n; ++i) {
        live = std::max(live,
                        i - 1 < p.liveBytes.size() ? p.liveBytes[i - 1] : 0.0);
        double mem = pre.weights[i] - pre.weights[j] + live * p.inFlight;
        if (mem > capacity)
          break; // longer stages only need more
        double compute = 0;
        for (const Prefix &q : pres)
          compute = std::max(compute, q.seconds[i] - q.seconds[j]);
        cost[j][i] = static_cast<float>(combine(p, j, i, compute));
      }
    }
  }
  best[0][0] = 0;
  for (size_t k = 1; k <= S; ++k) {
    const Costs &cost = costs[classKeys(p, k - 1)];
    for (size_t i = k; i <= n; ++i) {
      double b = kInf;
      uint32_t arg = 0;
      for (size_t j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf || cost[j][i] == static_cast<float>(kInf))
          continue;
        double c = std::max(best[k - 1][j], static_cast<double>(cost[j][i]));
        // Ties go to the later cut: deterministic and keeps early stages light.
        if (c <= b) {
          b = c;
          arg = static_cast<uint32_t>(j);
        }
      }
      best[k][i] = b;
      from[k][i] = arg;
    }
  }
  for (size_t k = 1; k <= S; ++k) {
    StageCut &r = result[k];
    if (best[k][n] == kInf)
      continue;
    r.feasible = true;
    std::vector<size_t> starts;
    for (size_t kk = k, i = n; kk > 0; --kk) {
      size_t j = from[kk][i];
      starts.push_back(j);
      i = j;
    }
    std::reverse(starts.begin(), starts.end());
    for (size_t s = 0; s < starts.size(); ++s) {
      size_t end = s + 1 < starts.size() ? starts[s + 1] : n;
      r.stageSeconds.push_back(stageSeconds(p, starts[s], end, s));
      if (s > 0)
        r.cuts.push_back(starts[s]);
    }
    r.slowest = *std::max_element(r.stageSeconds.begin(), r.stageSeconds.end());
  }
  return result;
}

StageCut bruteForceChain(const ChainProblem &p, size_t stages) {
  size_t n = p.opSeconds.size();
  StageCut bestCut;
  bestCut.slowest = kInf;
  std::vector<size_t> cuts;
  std::function<void(size_t)> place = [&](size_t from) {
    if (cuts.size() == stages - 1) {
      std::vector<size_t> starts = {0};
      starts.insert(starts.end(), cuts.begin(), cuts.end());
      StageCut c;
      c.cuts = cuts;
      c.feasible = true;
      for (size_t s = 0; s < starts.size(); ++s) {
        size_t end = s + 1 < starts.size() ? starts[s + 1] : n;
        if (stageMemory(p, starts[s], end) > stageCapacity(p, s))
          c.feasible = false;
        c.stageSeconds.push_back(stageSeconds(p, starts[s], end, s));
      }
      c.slowest =
          *std::max_element(c.stageSeconds.begin(), c.stageSeconds.end());
      if (c.feasible && c.slowest < bestCut.slowest)
        bestCut = c;
      return;
    }
    for (size_t i = from; i < n; ++i) {
      cuts.push_back(i);
      place(i + 1);
      cuts.pop_back();
    }
  };
  if (stages >= 1 && stages <= n)
    place(1);
  return bestCut;
}

} // namespace partc::costmodel
