//===- TestPlans.h - Small hand-built plans for runtime tests ---*- C++ -*-===//
#ifndef PARTC_TEST_UNIT_TESTPLANS_H
#define PARTC_TEST_UNIT_TESTPLANS_H

#include "runtime/plan/Plan.h"

namespace partc::runtime::testing {

inline BufferRef arena(uint64_t offset, Shape shape, DType t = DType::F32) {
  return BufferRef{MemorySpace::Arena, offset, TensorType{t, std::move(shape)}};
}

inline Instruction kernel(std::string name, std::vector<BufferRef> ins,
                          std::vector<BufferRef> outs, AttrMap attrs = {}) {
  Instruction in;
  in.op = OpCode::Kernel;
  in.kernel = std::move(name);
  in.inputs = std::move(ins);
  in.outputs = std::move(outs);
  in.attrs = std::move(attrs);
  return in;
}

inline Instruction io(OpCode op, uint32_t index, BufferRef buf,
                      uint64_t hostOffset = 0) {
  Instruction in;
  in.op = op;
  in.index = index;
  in.hostOffset = hostOffset;
  if (op == OpCode::LoadInput || op == OpCode::Recv)
    in.outputs.push_back(buf);
  else
    in.inputs.push_back(buf);
  return in;
}

inline Instruction waitConsumed(uint32_t channel) {
  Instruction in;
  in.op = OpCode::WaitConsumed;
  in.index = channel;
  return in;
}

/// y = relu(x) on device 0, sent to device 1, z = y + w there. x, y: [4].
inline Plan twoDevicePlan(std::vector<float> &weights) {
  Plan p;
  p.inputs = {{"x", {DType::F32, {4}}}};
  p.outputs = {{"z", {DType::F32, {4}}}};
  weights = {10, 20, 30, 40};
  p.weights = {{"w", {DType::F32, {4}}, 0}};
  p.weightData = reinterpret_cast<const uint8_t *>(weights.data());
  p.weightBytes = weights.size() * sizeof(float);
  p.channels = {{0, 1, 16}};
  p.devices.resize(2);
  p.devices[0].arenaBytes = 32;
  p.devices[0].instructions = {
      io(OpCode::LoadInput, 0, arena(0, {4})),
      kernel("relu", {arena(0, {4})}, {arena(16, {4})}),
      io(OpCode::Send, 0, arena(16, {4})), waitConsumed(0)};
  p.devices[1].arenaBytes = 32;
  BufferRef w{MemorySpace::Weight, 0, {DType::F32, {4}}};
  p.devices[1].instructions = {
      io(OpCode::Recv, 0, arena(0, {4})),
      kernel("add", {arena(0, {4}), w}, {arena(16, {4})}),
      io(OpCode::StoreOutput, 0, arena(16, {4}))};
  return p;
}

inline Instruction allReduce(uint32_t group, BufferRef from, BufferRef to,
                             std::vector<int64_t> devices) {
  Instruction in;
  in.op = OpCode::AllReduce;
  in.index = group;
  in.inputs = {from};
  in.outputs = {to};
  in.attrs.set("devices", AttrValue::ofInts(std::move(devices)));
  return in;
}

/// Data parallelism in miniature: device d loads row d of x [devices, 4],
/// y = relu(row); the devices average y (all_reduce group 0); device 0
/// stores the mean as z [4].
inline Plan allReducePlan(int devices) {
  Plan p;
  p.inputs = {{"x", {DType::F32, {devices, 4}}}};
  p.outputs = {{"z", {DType::F32, {4}}}};
  p.devices.resize(devices);
  std::vector<int64_t> all;
  for (int d = 0; d < devices; ++d)
    all.push_back(d);
  for (int d = 0; d < devices; ++d) {
    p.devices[d].arenaBytes = 48;
    p.devices[d].instructions = {
        io(OpCode::LoadInput, 0, arena(0, {4}), 16 * d),
        kernel("relu", {arena(0, {4})}, {arena(16, {4})}),
        allReduce(0, arena(16, {4}), arena(32, {4}), all)};
    if (d == 0)
      p.devices[d].instructions.push_back(
          io(OpCode::StoreOutput, 0, arena(32, {4})));
  }
  return p;
}

} // namespace partc::runtime::testing

#endif // PARTC_TEST_UNIT_TESTPLANS_H
