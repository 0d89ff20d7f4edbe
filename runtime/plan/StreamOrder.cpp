//===- StreamOrder.cpp - Waits between a program's streams ----------------===//
//
// The order a backend keeps when it runs a device's streams concurrently,
// found from the bytes each instruction reads and writes, so that a plan
// is ordered correctly whatever its memory plan reused. Kept apart from any
// backend so that it is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

#include <algorithm>

namespace partc::runtime {

namespace {

/// A byte range of a device's arena or state that an instruction reads or
/// writes; weights are never written.
struct Touch {
  MemorySpace space;
  uint64_t begin, end;
  bool write;
};

std::vector<Touch> touchesOf(const Instruction &in) {
  std::vector<Touch> touches;
  auto add = [&](const BufferRef &b, bool write) {
    if (b.space != MemorySpace::Weight)
      touches.push_back(
          {b.space, b.offset, b.offset + b.type.byteSize(), write});
  };
  for (const BufferRef &b : in.inputs)
    add(b, false);
  for (const BufferRef &b : in.outputs)
    add(b, true);
  return touches;
}

bool conflict(const std::vector<Touch> &a, const std::vector<Touch> &b) {
  for (const Touch &x : a)
    for (const Touch &y : b)
      if ((x.write || y.write) && x.space == y.space && x.begin < y.end &&
          y.begin < x.end)
        return true;
  return false;
}

} // namespace

std::vector<std::vector<StreamWait>>
streamWaits(const DeviceProgram &program,
            const std::function<bool(size_t)> &joinsAll,
            const std::function<uint8_t(size_t)> &streamOf) {
  const auto &instrs = program.instructions;
  size_t n = instrs.size();
  std::vector<std::vector<StreamWait>> waits(n);
  uint8_t streams = 1;
  for (size_t i = 0; i < n; ++i)
    streams = std::max<uint8_t>(streams, streamOf(i) + 1);
  std::vector<std::vector<Touch>> touches(n);
  for (size_t i = 0; i < n; ++i)
    touches[i] = touchesOf(instrs[i]);
  // synced[s][t]: the last instruction of stream t that stream s follows.
  std::vector<std::vector<size_t>> onStream(streams);
  std::vector<std::vector<int64_t>> synced(streams,
                                           std::vector<int64_t>(streams, -1));
  std::vector<bool> forked(streams, false);
  for (size_t i = 0; i < n; ++i) {
    uint8_t s = streamOf(i);
    if (joinsAll(i))
      for (uint8_t t = 1; t < streams; ++t) {
        if (!onStream[t].empty())
          synced[0][t] = static_cast<int64_t>(onStream[t].back());
        forked[t] = false;
      }
    if (s > 0 && !forked[s]) {
      forked[s] = true;
      synced[s][0] =
          onStream[0].empty() ? -1 : static_cast<int64_t>(onStream[0].back());
      for (uint8_t t = 1; t < streams; ++t)
        synced[s][t] = std::max(synced[s][t], synced[0][t]);
    }
    for (uint8_t t = 0; t < streams; ++t) {
      if (t == s)
        continue;
      for (auto it = onStream[t].rbegin();
           it != onStream[t].rend() && static_cast<int64_t>(*it) > synced[s][t];
           ++it)
        if (conflict(touches[i], touches[*it])) {
          waits[i].push_back({t, static_cast<uint32_t>(*it)});
          synced[s][t] = static_cast<int64_t>(*it);
          break;
        }
    }
    onStream[s].push_back(i);
  }
  return waits;
}

} // namespace partc::runtime
