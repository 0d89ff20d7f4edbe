//===- PartitionerTest.cpp - DP stage split equals brute force ------------===//
#include "compiler/CostModel/Partitioner.h"
#include "compiler/CostModel/Topology.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace partc::costmodel;

namespace {

/// A random DAG in topological order: each op reads one or two earlier
/// values (or the input); cut bytes are the sizes live across each cut, as
/// partc computes them, so skip edges are charged.
ChainProblem randomProblem(std::mt19937 &rng, size_t n, bool dag) {
  std::uniform_real_distribution<double> time(0.1, 10.0), bytes(1, 100);
  ChainProblem p;
  std::vector<double> size(n);
  std::vector<size_t> last(n);
  for (size_t i = 0; i < n; ++i) {
    p.opSeconds.push_back(time(rng));
    p.opWeightBytes.push_back(bytes(rng) * (rng() % 3 == 0 ? 10 : 1));
    size[i] = bytes(rng);
    last[i] = i;
  }
  for (size_t i = 1; i < n; ++i) {
    last[i - 1] = std::max(last[i - 1], i); // the chain edge
    if (dag && i >= 2 && rng() % 2) {
      size_t src = rng() % (i - 1); // a skip edge
      last[src] = std::max(last[src], i);
    }
  }
  p.cutBytes.assign(n + 1, 0);
  p.liveBytes.assign(n, 0);
  for (size_t v = 0; v < n; ++v) {
    for (size_t c = v + 1; c <= last[v]; ++c)
      p.cutBytes[c] += size[v];
    for (size_t c = v; c <= last[v]; ++c)
      p.liveBytes[c] += size[v];
  }
  p.linkBytesPerSecond = std::uniform_real_distribution<double>(5, 100)(rng);
  p.linkLatencySeconds = 0.01;
  p.inFlight = 1 + rng() % 2;
  p.overlapTransfers = rng() % 2;
  p.localBytesPerSecond = std::uniform_real_distribution<double>(20, 400)(rng);
  // Sometimes tight memory, so that some splits are infeasible.
  double total = 0;
  for (double w : p.opWeightBytes)
    total += w;
  p.memoryBytes = rng() % 2 ? 1e30 : total / (1 + rng() % 3) + 200;
  // Sometimes a mixed machine: a second class of device, slower or faster
  // per op and with its own memory, at some of the stage positions.
  if (rng() % 2) {
    std::vector<double> other;
    for (double t : p.opSeconds)
      other.push_back(t * std::uniform_real_distribution<double>(0.3, 3)(rng));
    p.classOpSeconds.push_back(other);
    p.classMemoryBytes.push_back(rng() % 2 ? 1e30 : total / 2 + 100);
    // Class indices refer to classOpSeconds; 1 means "like the default".
    p.classOpSeconds.push_back(p.opSeconds);
    p.classMemoryBytes.push_back(p.memoryBytes);
    // Sometimes two replicas share the cuts: each stage on one device of
    // each replica's class.
    bool replicas = rng() % 2;
    for (size_t k = 0; k < 5; ++k) {
      p.stageClasses.push_back({size_t(rng() % 2)});
      if (replicas)
        p.stageClasses.back().push_back(rng() % 2);
    }
  }
  return p;
}

void expectOptimal(const ChainProblem &p, size_t maxStages) {
  std::vector<StageCut> dp = solveChain(p, maxStages);
  for (size_t s = 1; s <= maxStages && s <= p.opSeconds.size(); ++s) {
    StageCut brute = bruteForceChain(p, s);
    ASSERT_EQ(dp[s].feasible, brute.slowest < 1e300)
        << "stages " << s << " of " << p.opSeconds.size();
    if (!dp[s].feasible)
      continue;
    EXPECT_NEAR(dp[s].slowest, brute.slowest, 1e-5 * brute.slowest)
        << "stages " << s << " of " << p.opSeconds.size();
    // The reported split must itself fit and have the reported cost.
    std::vector<size_t> starts = {0};
    starts.insert(starts.end(), dp[s].cuts.begin(), dp[s].cuts.end());
    double slowest = 0;
    for (size_t k = 0; k < starts.size(); ++k) {
      size_t end = k + 1 < starts.size() ? starts[k + 1] : p.opSeconds.size();
      ASSERT_LT(starts[k], end);
      EXPECT_LE(stageMemory(p, starts[k], end), stageCapacity(p, k));
      slowest = std::max(slowest, stageSeconds(p, starts[k], end, k));
    }
    EXPECT_NEAR(slowest, dp[s].slowest, 1e-9 * slowest);
  }
}

TEST(Partitioner, MatchesBruteForceOnRandomChains) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial)
    expectOptimal(randomProblem(rng, 1 + rng() % 10, /*dag=*/false), 5);
}

TEST(Partitioner, MatchesBruteForceOnRandomDags) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 300; ++trial)
    expectOptimal(randomProblem(rng, 2 + rng() % 9, /*dag=*/true), 5);
}

TEST(Partitioner, ChargesTransfersOfSkipEdges) {
  // Two equal ops; a huge tensor crosses the only cut: one stage is better
  // than two, and two stages pay the transfer.
  ChainProblem p;
  p.opSeconds = {1, 1};
  p.opWeightBytes = {0, 0};
  p.liveBytes = {1, 1};
  p.cutBytes = {0, 1000, 0};
  p.linkBytesPerSecond = 100;
  std::vector<StageCut> r = solveChain(p, 2);
  EXPECT_DOUBLE_EQ(r[1].slowest, 2.0);
  EXPECT_DOUBLE_EQ(r[2].slowest, 11.0);
}

TEST(Partitioner, OverlappedTransfersCostTheLargerOfTransferAndCompute) {
  // Streaming: the 0.5 s transfer hides behind the receiving stage's 1 s of
  // compute, which pays instead for the peer copy's writes of the 50 bytes
  // into its memory at 1000 B/s; the sending stage for the copy's reads.
  ChainProblem p;
  p.opSeconds = {1, 1};
  p.opWeightBytes = {0, 0};
  p.liveBytes = {50, 50};
  p.cutBytes = {0, 50, 0};
  p.linkBytesPerSecond = 100;
  p.localBytesPerSecond = 1000;
  EXPECT_DOUBLE_EQ(solveChain(p, 2)[2].slowest, 1.5);
  p.overlapTransfers = true;
  StageCut r = solveChain(p, 2)[2];
  EXPECT_DOUBLE_EQ(r.stageSeconds[0], 1.05);
  EXPECT_DOUBLE_EQ(r.stageSeconds[1], 1.05);
  // A transfer longer than the compute is what the stage costs.
  p.linkBytesPerSecond = 10;
  EXPECT_DOUBLE_EQ(solveChain(p, 2)[2].slowest, 5.0);
}

TEST(Partitioner, GivesTheSmallDeviceLessWork) {
  // Four equal ops; the second device is three times slower and holds the
  // weights of one op only: it gets the last op.
  ChainProblem p;
  p.opSeconds = {1, 1, 1, 1};
  p.opWeightBytes = {10, 10, 10, 10};
  p.liveBytes = {0, 0, 0, 0};
  p.cutBytes = {0, 0, 0, 0, 0};
  p.classOpSeconds = {{1, 1, 1, 1}, {3, 3, 3, 3}};
  p.classMemoryBytes = {100, 10};
  p.stageClasses = {{0}, {1}};
  StageCut r = solveChain(p, 2)[2];
  ASSERT_TRUE(r.feasible);
  EXPECT_EQ(r.cuts, (std::vector<size_t>{3}));
  EXPECT_DOUBLE_EQ(r.slowest, 3.0);
  // Costed as two equal devices, the split would be even.
  p.stageClasses.clear();
  EXPECT_EQ(solveChain(p, 2)[2].cuts, (std::vector<size_t>{2}));
}

TEST(Partitioner, RespectsMemory) {
  ChainProblem p;
  p.opSeconds = {1, 1, 1};
  p.opWeightBytes = {60, 60, 60};
  p.liveBytes = {0, 0, 0};
  p.cutBytes = {0, 0, 0, 0};
  p.memoryBytes = 100;
  std::vector<StageCut> r = solveChain(p, 3);
  EXPECT_FALSE(r[1].feasible);
  EXPECT_FALSE(r[2].feasible);
  EXPECT_TRUE(r[3].feasible);
}

/// Four devices, every link slow except the given pairs.
Topology withFastLinks(std::vector<std::pair<size_t, size_t>> fast) {
  Topology t;
  t.devices.resize(4);
  t.links.assign(16, LinkSpec{10e9, 1e-5});
  for (auto [a, b] : fast)
    t.links[a * 4 + b] = t.links[b * 4 + a] = LinkSpec{400e9, 1e-5};
  return t;
}

TEST(Topology, ChainsFollowFastLinks) {
  // Fast pairs 0-2 and 1-3: two 2-stage replicas are {0, 2} and {1, 3}.
  Topology t = withFastLinks({{0, 2}, {1, 3}});
  EXPECT_EQ(t.chainGroups(2, 2), (std::vector<size_t>{0, 2, 1, 3}));
  EXPECT_DOUBLE_EQ(t.slowestChainLink(t.chainGroups(2, 2), 2).bytesPerSecond,
                   400e9);
  // Index order would pair 0 with 1 over a slow link.
  EXPECT_DOUBLE_EQ(t.slowestChainLink({0, 1, 2, 3}, 2).bytesPerSecond, 10e9);
  // One stage per replica needs no links; uniform machines keep index order.
  EXPECT_EQ(t.chainGroups(4, 1), (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(withFastLinks({}).chainGroups(1, 4),
            (std::vector<size_t>{0, 1, 2, 3}));
  // A path 0-2-1-3 is followed by one 4-stage chain.
  EXPECT_EQ(withFastLinks({{0, 2}, {2, 1}, {1, 3}}).chainGroups(1, 4),
            (std::vector<size_t>{0, 2, 1, 3}));
}

} // namespace

TEST(Partitioner, ReplicasOfUnlikeChainsCostTheirSlowerDevice) {
  // Two replicas, each a chain of one fast and one slow device, in opposite
  // order: every stage has a slow device, so the cut is even. With both
  // replicas fast first, the slow second stage gets one op.
  ChainProblem p;
  p.opSeconds = {1, 1, 1, 1};
  p.opWeightBytes = {0, 0, 0, 0};
  p.liveBytes = {0, 0, 0, 0};
  p.cutBytes = {0, 0, 0, 0, 0};
  p.classOpSeconds = {{1, 1, 1, 1}, {3, 3, 3, 3}};
  p.classMemoryBytes = {1e30, 1e30};
  p.stageClasses = {{0, 1}, {1, 0}};
  StageCut r = solveChain(p, 2)[2];
  EXPECT_EQ(r.cuts, std::vector<size_t>({2}));
  EXPECT_DOUBLE_EQ(r.slowest, 6.0);
  p.stageClasses = {{0, 0}, {1, 1}};
  r = solveChain(p, 2)[2];
  EXPECT_EQ(r.cuts, std::vector<size_t>({3}));
  EXPECT_DOUBLE_EQ(r.slowest, 3.0);
}
