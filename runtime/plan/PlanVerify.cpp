//===- PlanVerify.cpp - Semantic checks and summary of a plan -------------===//
#include "runtime/kernels/Kernel.h"
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace partc::runtime {

namespace {

const char *spaceName(MemorySpace space) {
  switch (space) {
  case MemorySpace::Arena:
    return "arena";
  case MemorySpace::Weight:
    return "weights";
  case MemorySpace::State:
    return "state";
  }
  return "?";
}

/// Byte size with an overflow check: element counts are bounded when read,
/// but their product may still be absurd.
bool safeByteSize(const TensorType &t, uint64_t &bytes) {
  unsigned __int128 n = dtypeSize(t.dtype);
  for (int64_t d : t.shape) {
    n *= static_cast<uint64_t>(d);
    if (n > (unsigned __int128)(uint64_t(1) << 62))
      return false;
  }
  bytes = static_cast<uint64_t>(n);
  return true;
}

Status checkBuffer(const Plan &plan, const DeviceProgram &dev,
                   const BufferRef &b, const std::string &where) {
  uint64_t bytes;
  if (!safeByteSize(b.type, bytes) || dtypeSize(b.type.dtype) == 0)
    return Status::error(where + ": buffer type " + b.type.str() +
                         " is invalid");
  uint64_t limit = b.space == MemorySpace::Arena   ? dev.arenaBytes
                   : b.space == MemorySpace::State ? dev.stateBytes
                                                   : plan.weightBytes;
  if (b.offset > limit || bytes > limit - b.offset)
    return Status::error(where + ": buffer [" + std::to_string(b.offset) +
                         ", +" + std::to_string(bytes) + ") exceeds the " +
                         spaceName(b.space) + " of " + std::to_string(limit) +
                         " bytes");
  // Kernels access elements through typed pointers.
  if (b.offset % dtypeSize(b.type.dtype) != 0)
    return Status::error(where + ": buffer at offset " +
                         std::to_string(b.offset) + " is not aligned to its " +
                         std::to_string(dtypeSize(b.type.dtype)) +
                         "-byte elements");
  // Kernels read bool as C++ bool, whose only values are 0 and 1.
  if (b.space == MemorySpace::Weight && b.type.dtype == DType::Bool)
    for (uint64_t i = 0; i < bytes; ++i)
      if (plan.weightData[b.offset + i] > 1)
        return Status::error(where + ": bool weights at offset " +
                             std::to_string(b.offset + i) + " hold " +
                             std::to_string(plan.weightData[b.offset + i]) +
                             "; a bool is 0 or 1");
  return Status();
}

Status checkStates(const Plan &plan) {
  for (size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].stateBytes > kMaxTensorBytes)
      return Status::error("device " + std::to_string(d) + " has a state of " +
                           std::to_string(plan.devices[d].stateBytes) +
                           " bytes, over partc's limit of 2^50");
  for (const StateDecl &s : plan.states) {
    std::string what = "state '" + s.name + "'";
    uint64_t bytes;
    if (s.device >= plan.devices.size())
      return Status::error(what + " is on device " + std::to_string(s.device) +
                           ", which the plan does not have");
    if (!safeByteSize(s.type, bytes) || dtypeSize(s.type.dtype) == 0 ||
        s.offset % dtypeSize(s.type.dtype) != 0 ||
        s.offset > plan.devices[s.device].stateBytes ||
        bytes > plan.devices[s.device].stateBytes - s.offset)
      return Status::error(what + " lies outside device " +
                           std::to_string(s.device) + "'s state");
    if (!s.zeroInit && (s.initOffset > plan.weightBytes ||
                        bytes > plan.weightBytes - s.initOffset))
      return Status::error(what + " is initialized from outside the weights");
  }
  return Status();
}

/// A run is one training step: every read of a state tensor sees its value
/// from before the step, so all readers come before the one instruction
/// that updates it.
Status checkStateOrder(const DeviceProgram &dev, size_t d) {
  struct Write {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Write> writes;
  auto overlaps = [](const Write &w, const BufferRef &b) {
    uint64_t end = b.offset + b.type.byteSize();
    return b.offset < w.end && w.begin < end;
  };
  for (size_t i = 0; i < dev.instructions.size(); ++i) {
    const Instruction &in = dev.instructions[i];
    auto describe = [&] { return describeInstruction(d, i, in); };
    for (const BufferRef &b : in.inputs) {
      if (b.space != MemorySpace::State)
        continue;
      for (const Write &w : writes)
        if (overlaps(w, b))
          return Status::error(
              describe() + " reads state at offset " +
              std::to_string(b.offset) + " after instruction " +
              std::to_string(w.index) +
              " updated it; every read of a state must come before its update");
    }
    for (const BufferRef &b : in.outputs) {
      if (b.space != MemorySpace::State)
        continue;
      if (in.op != OpCode::Kernel)
        return Status::error(describe() + " writes state; only kernels may");
      for (const Write &w : writes)
        if (overlaps(w, b))
          return Status::error(describe() + " updates state at offset " +
                               std::to_string(b.offset) + " that instruction " +
                               std::to_string(w.index) +
                               " already updated; a state changes once a run");
    }
    for (const BufferRef &b : in.outputs)
      if (b.space == MemorySpace::State)
        writes.push_back({b.offset, b.offset + b.type.byteSize(), i});
  }
  return Status();
}

/// Replays the schedule abstractly; a state where no device can move while
/// some still have work is a deadlock.
Status checkNoDeadlock(const Plan &plan) {
  size_t n = plan.devices.size();
  std::vector<size_t> pc(n, 0);
  std::vector<bool> sent(plan.channels.size()), consumed(plan.channels.size());
  // Devices waiting at each all_reduce group; all of them go on together.
  std::map<uint32_t, size_t> arrived;
  std::vector<bool> waiting(n);
  auto groupSize = [](const Instruction &in) {
    return in.attrs.getInts("devices").size();
  };
  while (true) {
    bool progress = false, done = true;
    for (size_t d = 0; d < n; ++d) {
      const auto &instrs = plan.devices[d].instructions;
      while (pc[d] < instrs.size()) {
        const Instruction &in = instrs[pc[d]];
        if (in.op == OpCode::Recv && !sent[in.index])
          break;
        if (in.op == OpCode::WaitConsumed && !consumed[in.index])
          break;
        if (in.op == OpCode::AllReduce) {
          if (!waiting[d]) {
            waiting[d] = true;
            ++arrived[in.index];
            progress = true;
          }
          if (arrived[in.index] < groupSize(in))
            break;
          waiting[d] = false;
        }
        if (in.op == OpCode::Send)
          sent[in.index] = true;
        if (in.op == OpCode::Recv)
          consumed[in.index] = true;
        ++pc[d];
        progress = true;
      }
      if (pc[d] < instrs.size())
        done = false;
    }
    if (done)
      return Status();
    if (!progress) {
      std::ostringstream os;
      os << "the schedule deadlocks:";
      for (size_t d = 0; d < n; ++d)
        if (pc[d] < plan.devices[d].instructions.size()) {
          const Instruction &in = plan.devices[d].instructions[pc[d]];
          os << " device " << d << " waits at instruction " << pc[d] << " ("
             << opCodeName(in.op)
             << (in.op == OpCode::AllReduce ? " group " : " channel ")
             << in.index << ");";
        }
      return Status::error(os.str());
    }
  }
}

} // namespace

Status verifyPlan(const Plan &plan) {
  if (plan.devices.empty())
    return Status::error("plan has no devices");
  for (size_t d = 0; d < plan.devices.size(); ++d)
    if (plan.devices[d].arenaBytes > kMaxTensorBytes)
      return Status::error("device " + std::to_string(d) + " has an arena of " +
                           std::to_string(plan.devices[d].arenaBytes) +
                           " bytes, over partc's limit of 2^50");
  for (const WeightDecl &w : plan.weights) {
    uint64_t bytes;
    if (!safeByteSize(w.type, bytes) || w.offset > plan.weightBytes ||
        bytes > plan.weightBytes - w.offset)
      return Status::error("weight '" + w.name + "' lies outside the weights");
  }
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    const Channel &ch = plan.channels[c];
    if (ch.srcDevice >= plan.devices.size() ||
        ch.dstDevice >= plan.devices.size() || ch.srcDevice == ch.dstDevice)
      return Status::error("channel " + std::to_string(c) +
                           " connects invalid devices");
  }
  PARTC_RETURN_IF_ERROR(checkStates(plan));
  std::vector<int> sends(plan.channels.size()), recvs(plan.channels.size()),
      waits(plan.channels.size());
  struct Group {
    std::vector<int64_t> devices;
    std::vector<TensorType> types; // of a bucket's buffers
    std::vector<int> seen;         // per device
  };
  std::map<uint32_t, Group> groups;
  // Groups are numbered densely (backends index tables by them).
  size_t collectiveOps = 0;
  for (const DeviceProgram &dev : plan.devices)
    for (const Instruction &in : dev.instructions)
      collectiveOps += in.op == OpCode::AllReduce;
  // Host byte ranges written to each output, to prove full coverage.
  std::vector<std::vector<std::pair<uint64_t, uint64_t>>> outputRanges(
      plan.outputs.size());

  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &dev = plan.devices[d];
    for (size_t i = 0; i < dev.instructions.size(); ++i) {
      const Instruction &in = dev.instructions[i];
      std::string where = "device " + std::to_string(d) + " instruction " +
                          std::to_string(i) + " (" + opCodeName(in.op) +
                          (in.location.empty() ? "" : " " + in.location) + ")";
      if (in.stream >= kMaxStreams)
        return Status::error(where + ": stream " + std::to_string(in.stream) +
                             " is not below " + std::to_string(kMaxStreams));
      if (in.stream != 0 && in.op != OpCode::Kernel)
        return Status::error(where +
                             ": only kernels run on a stream other "
                             "than 0, this one names stream " +
                             std::to_string(in.stream));
      for (const BufferRef &b : in.inputs)
        PARTC_RETURN_IF_ERROR(checkBuffer(plan, dev, b, where));
      for (const BufferRef &b : in.outputs) {
        PARTC_RETURN_IF_ERROR(checkBuffer(plan, dev, b, where));
        if (b.space == MemorySpace::Weight)
          return Status::error(where + ": writes to the read-only weights");
      }
      auto arity = [&](size_t ni, size_t no) -> Status {
        if (in.inputs.size() != ni || in.outputs.size() != no)
          return Status::error(where + ": wrong number of operands");
        return Status();
      };
      auto channel = [&]() -> Status {
        if (in.index >= plan.channels.size())
          return Status::error(where + ": channel " + std::to_string(in.index) +
                               " does not exist");
        return Status();
      };
      switch (in.op) {
      case OpCode::Kernel: {
        if (in.kernel.empty())
          return Status::error(where + ": kernel has no name");
        // Every backend's kernels take the CPU kernel's checks of types and
        // attributes: a plan that lacks a parameter is refused here, never
        // run with a default the kernel made up.
        std::vector<TensorType> inputs, outputs;
        instructionTypes(in, inputs, outputs);
        std::unique_ptr<Kernel> kernel;
        Status s =
            createCpuKernel(in.kernel, in.attrs, inputs, outputs, kernel);
        if (!s.ok())
          return Status::error(where + ": " + s.message());
        break;
      }
      case OpCode::LoadInput:
      case OpCode::StoreOutput: {
        bool load = in.op == OpCode::LoadInput;
        PARTC_RETURN_IF_ERROR(load ? arity(0, 1) : arity(1, 0));
        const auto &decls = load ? plan.inputs : plan.outputs;
        if (in.index >= decls.size())
          return Status::error(where + ": no such " +
                               (load ? "input " : "output ") +
                               std::to_string(in.index));
        const TensorDecl &decl = decls[in.index];
        const BufferRef &b = load ? in.outputs[0] : in.inputs[0];
        uint64_t total = decl.type.byteSize(), bytes = b.type.byteSize();
        if (b.type.dtype != decl.type.dtype || in.hostOffset > total ||
            bytes > total - in.hostOffset)
          return Status::error(where + ": range does not fit '" + decl.name +
                               "' " + decl.type.str());
        if (!load)
          outputRanges[in.index].push_back({in.hostOffset, bytes});
        break;
      }
      case OpCode::Send:
      case OpCode::Recv: {
        bool send = in.op == OpCode::Send;
        PARTC_RETURN_IF_ERROR(send ? arity(1, 0) : arity(0, 1));
        PARTC_RETURN_IF_ERROR(channel());
        const Channel &ch = plan.channels[in.index];
        const BufferRef &b = send ? in.inputs[0] : in.outputs[0];
        if ((send ? ch.srcDevice : ch.dstDevice) != d ||
            b.type.byteSize() != ch.bytes)
          return Status::error(where + ": does not match channel " +
                               std::to_string(in.index));
        (send ? sends : recvs)[in.index]++;
        break;
      }
      case OpCode::AllReduce: {
        if (in.inputs.empty() || in.inputs.size() != in.outputs.size())
          return Status::error(
              where + ": averages " + std::to_string(in.inputs.size()) +
              " buffers into " + std::to_string(in.outputs.size()) +
              "; it needs one target per source, at least "
              "one");
        std::vector<TensorType> types;
        for (size_t k = 0; k < in.inputs.size(); ++k) {
          const TensorType &type = in.inputs[k].type;
          if (type.dtype != DType::F32 || in.outputs[k].type != type)
            return Status::error(where + ": averages " + type.str() + " into " +
                                 in.outputs[k].type.str() +
                                 "; both must be the same f32 type");
          types.push_back(type);
        }
        if (in.index >= collectiveOps)
          return Status::error(where + ": group " + std::to_string(in.index) +
                               " is out of range; the plan numbers its " +
                               std::to_string(collectiveOps) +
                               " all_reduce instructions' groups from 0");
        std::vector<int64_t> devices = in.attrs.getInts("devices");
        std::vector<int64_t> sorted = devices;
        std::sort(sorted.begin(), sorted.end());
        if (devices.size() < 2 ||
            std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
            sorted.front() < 0 ||
            sorted.back() >= static_cast<int64_t>(plan.devices.size()) ||
            !std::count(devices.begin(), devices.end(), int64_t(d)))
          return Status::error(where + ": group " + std::to_string(in.index) +
                               " must list at least 2 distinct devices of "
                               "the plan, this one among them");
        auto [it, fresh] = groups.try_emplace(in.index);
        Group &g = it->second;
        if (fresh) {
          g.devices = devices;
          g.types = types;
          g.seen.assign(plan.devices.size(), 0);
        } else if (g.devices != devices || g.types != types) {
          return Status::error(where + ": group " + std::to_string(in.index) +
                               " disagrees with its other devices on its "
                               "devices or types");
        }
        if (g.seen[d]++)
          return Status::error(where + ": device " + std::to_string(d) +
                               " meets group " + std::to_string(in.index) +
                               " twice");
        break;
      }
      case OpCode::WaitConsumed:
        PARTC_RETURN_IF_ERROR(arity(0, 0));
        PARTC_RETURN_IF_ERROR(channel());
        if (plan.channels[in.index].srcDevice != d)
          return Status::error(where + ": waits on another device's channel");
        waits[in.index]++;
        break;
      }
    }
    PARTC_RETURN_IF_ERROR(checkStateOrder(dev, d));
  }
  for (size_t c = 0; c < plan.channels.size(); ++c)
    if (sends[c] != 1 || recvs[c] != 1 || waits[c] > 1)
      return Status::error("channel " + std::to_string(c) + " has " +
                           std::to_string(sends[c]) + " sends, " +
                           std::to_string(recvs[c]) + " receives and " +
                           std::to_string(waits[c]) +
                           " waits; expected exactly one send and receive");
  for (const auto &[id, g] : groups)
    for (int64_t d : g.devices)
      if (!g.seen[d])
        return Status::error("device " + std::to_string(d) +
                             " never meets all_reduce group " +
                             std::to_string(id) + " that it belongs to");
  for (size_t o = 0; o < plan.outputs.size(); ++o) {
    auto &ranges = outputRanges[o];
    std::sort(ranges.begin(), ranges.end());
    uint64_t covered = 0;
    for (auto [off, len] : ranges) {
      if (off != covered)
        return Status::error("output '" + plan.outputs[o].name +
                             "' is not written exactly once at byte " +
                             std::to_string(covered));
      covered += len;
    }
    if (covered != plan.outputs[o].type.byteSize())
      return Status::error("output '" + plan.outputs[o].name +
                           "' is not fully written");
  }
  return checkNoDeadlock(plan);
}

std::string describeInstruction(size_t device, size_t index,
                                const Instruction &in) {
  std::string s = "device " + std::to_string(device) + " instruction " +
                  std::to_string(index) + " (" + opCodeName(in.op);
  if (in.op == OpCode::Kernel)
    s += " " + in.kernel;
  if (in.op == OpCode::AllReduce)
    s += " group " + std::to_string(in.index);
  if (!in.location.empty())
    s += ", ONNX node '" + in.location + "'";
  return s + ")";
}

void instructionTypes(const Instruction &in, std::vector<TensorType> &inputs,
                      std::vector<TensorType> &outputs) {
  inputs.clear();
  outputs.clear();
  for (const BufferRef &b : in.inputs)
    inputs.push_back(b.type);
  for (const BufferRef &b : in.outputs)
    outputs.push_back(b.type);
}

Status rootCause(const std::vector<Status> &results) {
  for (const Status &s : results)
    if (!s.ok() && s.message().find("aborted:") == std::string::npos)
      return s;
  for (const Status &s : results)
    if (!s.ok())
      return s;
  return Status();
}

bool exchangesWithPeer(OpCode op) {
  return op == OpCode::AllReduce || op == OpCode::Send || op == OpCode::Recv ||
         op == OpCode::WaitConsumed;
}

size_t firstPeerWait(const DeviceProgram &program) {
  const auto &instrs = program.instructions;
  for (size_t i = 0; i < instrs.size(); ++i)
    if (instrs[i].op == OpCode::AllReduce || instrs[i].op == OpCode::Recv ||
        instrs[i].op == OpCode::WaitConsumed)
      return i;
  return instrs.size();
}

std::string stallReport(const Plan &plan, const std::vector<int64_t> &reached,
                        const std::vector<bool> &pending,
                        const std::function<std::string(size_t)> &name) {
  size_t n = plan.devices.size();
  auto at = [&](size_t d, int64_t i) {
    const auto &instrs = plan.devices[d].instructions;
    if (i >= static_cast<int64_t>(instrs.size()))
      return std::string("the end of its program");
    // describeInstruction without its leading "device D ".
    std::string what = describeInstruction(d, size_t(i), instrs[size_t(i)]);
    return what.substr(what.find("instruction"));
  };
  // Where device `e` does `op` for group or channel `index`, or -1.
  auto counterpart = [&](size_t e, OpCode op, uint32_t index) -> int64_t {
    const auto &instrs = plan.devices[e].instructions;
    for (size_t i = 0; i < instrs.size(); ++i)
      if (instrs[i].op == op && instrs[i].index == index)
        return static_cast<int64_t>(i);
    return -1;
  };
  std::map<size_t, std::string> behind;
  for (size_t d = 0; d < n; ++d) {
    const auto &instrs = plan.devices[d].instructions;
    if (!pending[d] || reached[d] < 0 ||
        reached[d] >= static_cast<int64_t>(instrs.size()))
      continue;
    const Instruction &in = instrs[size_t(reached[d])];
    std::vector<std::pair<size_t, int64_t>> needed;
    if (in.op == OpCode::AllReduce) {
      for (int64_t e : in.attrs.getInts("devices"))
        if (static_cast<size_t>(e) != d && static_cast<size_t>(e) < n)
          needed.push_back(
              {size_t(e), counterpart(size_t(e), OpCode::AllReduce, in.index)});
    } else if (in.op == OpCode::Recv) {
      size_t src = plan.channels[in.index].srcDevice;
      needed.push_back({src, counterpart(src, OpCode::Send, in.index)});
    } else if (in.op == OpCode::WaitConsumed) {
      size_t dst = plan.channels[in.index].dstDevice;
      needed.push_back({dst, counterpart(dst, OpCode::Recv, in.index)});
    }
    for (auto [e, i] : needed)
      if (i >= 0 && reached[e] < i && !behind.count(e))
        behind[e] = name(e) + " has not reached " + at(e, i) + ", which " +
                    name(d) + " waits for";
  }
  std::string report;
  for (auto &[e, why] : behind)
    report += (report.empty() ? "" : "; ") + why;
  report += report.empty() ? "where each unfinished device got to: "
                           : ". Where each unfinished device got to: ";
  bool first = true;
  for (size_t d = 0; d < n; ++d) {
    if (!pending[d])
      continue;
    report += (first ? "" : "; ") + name(d) + " " +
              (reached[d] < 0 ? std::string("had not reached its first "
                                            "exchange with another device")
                              : "last reached " + at(d, reached[d]));
    first = false;
  }
  return report;
}

std::string runName(const Plan &plan, size_t run) {
  return (plan.states.empty() ? "run " : "step ") + std::to_string(run);
}

std::string timeoutHeadline(const Plan &plan, size_t run, double seconds) {
  char limit[32];
  std::snprintf(limit, sizeof(limit), "%g", seconds);
  return runName(plan, run) + " did not finish within " + limit +
         " s (--step-timeout)";
}

std::string summarizePlan(const Plan &plan) {
  std::ostringstream os;
  os << "plan: " << plan.devices.size() << " device(s)";
  for (const auto &key : {"strategy", "micro_batches", "precision", "model"}) {
    auto it = plan.metadata.find(key);
    if (it != plan.metadata.end())
      os << ", " << key << "=" << it->second;
  }
  os << ", " << plan.weights.size() << " weights (" << plan.weightBytes
     << " bytes), ";
  if (!plan.states.empty())
    os << plan.states.size() << " state tensors, ";
  os << plan.channels.size() << " transfers";
  size_t nccl = 0;
  for (const Channel &c : plan.channels)
    nccl += c.transport == Transport::Nccl;
  if (nccl)
    os << " (" << nccl << " through NCCL)";
  os << "\n";
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    const DeviceProgram &dev = plan.devices[d];
    size_t kernels = 0, sends = 0, recvs = 0, reduces = 0, reducedTensors = 0,
           sideKernels = 0;
    uint64_t sentBytes = 0, recvBytes = 0, reducedBytes = 0;
    for (const Instruction &in : dev.instructions) {
      if (in.op == OpCode::Kernel)
        ++kernels;
      if (in.stream != 0)
        ++sideKernels;
      if (in.op == OpCode::AllReduce) {
        ++reduces;
        reducedTensors += in.inputs.size();
        for (const BufferRef &b : in.inputs)
          reducedBytes += b.type.byteSize();
      }
      if (in.op == OpCode::Send) {
        ++sends;
        sentBytes += plan.channels[in.index].bytes;
      }
      if (in.op == OpCode::Recv) {
        ++recvs;
        recvBytes += plan.channels[in.index].bytes;
      }
    }
    os << "  device " << d << ": " << kernels << " kernels, arena "
       << dev.arenaBytes << " bytes, ";
    if (dev.stateBytes)
      os << "state " << dev.stateBytes << " bytes, ";
    os << "sends " << sends << " (" << sentBytes << " bytes), receives "
       << recvs << " (" << recvBytes << " bytes)";
    if (reduces)
      os << ", all-reduces " << reduces << " (" << reducedTensors
         << " tensors, " << reducedBytes << " bytes)";
    if (sideKernels)
      os << ", " << sideKernels << " kernels on side streams";
    os << "\n";
  }
  // partc-assign-streams' choice, as placement recorded it.
  auto regions = plan.metadata.find("branch_regions");
  auto saving = plan.metadata.find("branch_saving_ms");
  if (regions != plan.metadata.end() && saving != plan.metadata.end()) {
    os << "  branches: " << regions->second
       << " region(s) run side by side on streams, predicted to save "
       << saving->second << " ms";
    auto step = plan.metadata.find("predicted_step_ms");
    auto oneStream = plan.metadata.find("predicted_step_ms_one_stream");
    if (step != plan.metadata.end() && oneStream != plan.metadata.end())
      os << ": predicted step " << step->second << " ms, " << oneStream->second
         << " on one stream";
    os << "\n";
  }
  return os.str();
}

} // namespace partc::runtime
