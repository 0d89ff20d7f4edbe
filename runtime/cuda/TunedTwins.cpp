//===- TunedTwins.cpp - One tuning choice for identical kernels -----------===//
#include "runtime/cuda/TunedTwins.h"

#include <cmath>

namespace partc::runtime::cuda {

void addTunedTwin(std::vector<TunedTwins> &groups, const DeviceProgram &prog,
                  size_t index, const std::vector<float> &times) {
  const Instruction &in = prog.instructions[index];
  std::vector<TensorType> ins, outs;
  instructionTypes(in, ins, outs);
  for (TunedTwins &g : groups) {
    const Instruction &other = prog.instructions[g.members[0]];
    if (other.kernel != in.kernel || !(other.attrs == in.attrs) ||
        g.times[0].size() != times.size())
      continue;
    std::vector<TensorType> otherIns, otherOuts;
    instructionTypes(other, otherIns, otherOuts);
    if (otherIns != ins || otherOuts != outs)
      continue;
    g.members.push_back(index);
    g.times.push_back(times);
    return;
  }
  groups.push_back({{index}, {times}});
}

void chooseForTwins(const std::vector<TunedTwins> &groups,
                    std::vector<std::unique_ptr<GpuKernel>> &kernels) {
  for (const TunedTwins &g : groups) {
    if (g.members.size() < 2)
      continue;
    size_t count = g.times[0].size(), best = count;
    float bestSum = INFINITY;
    for (size_t c = 0; c < count; ++c) {
      float sum = 0;
      for (const std::vector<float> &t : g.times)
        sum += t[c];
      if (sum < bestSum) {
        bestSum = sum;
        best = c;
      }
    }
    if (best == count)
      continue;
    for (size_t i : g.members)
      kernels[i]->adoptCandidate(best);
  }
}

} // namespace partc::runtime::cuda
