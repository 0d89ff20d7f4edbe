//===- Plan.h - In-memory form of a partc execution plan ------------------===//
//
// A plan is one static instruction stream per device plus the weights. It is
// what `partc compile` writes and what every backend executes. The runtime
// owns this format; the compiler includes this header to write plans.
//
// Transfers follow a pull protocol, which keeps both sides' static memory
// plans valid without a staging buffer:
//   send(c, src)   on the source: src is ready for channel c;
//   recv(c, dst)   on the destination: waits for send(c), copies src into
//                  dst, then marks c consumed;
//   wait(c)        on the source: waits until c is consumed, after which the
//                  source may reuse src's memory.
// Every channel is used exactly once per run.
//
// Collectives are rendezvous of several devices:
//   all_reduce(g, src, dst)  on each device of group g (attribute
//                  "devices"): when every one has reached it, each gets in
//                  dst the mean of all their src, summed in the order of
//                  "devices"; none goes on until all have read every src.
// Every device meets its groups in the same order; each group runs once
// per run.
//
//===----------------------------------------------------------------------===//
#ifndef PARTC_RUNTIME_PLAN_PLAN_H
#define PARTC_RUNTIME_PLAN_PLAN_H

#include "runtime/Support.h"
#include "runtime/kernels/Attrs.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace partc::runtime {

constexpr char kPlanMagic[8] = {'P', 'A', 'R', 'T', 'C', 'P', 'L', 'N'};
/// Version 2: channels say how they move (Transport). Version 3: state
/// (StateDecl), the third memory space. Version 4: collectives (AllReduce).
/// Version 5: each instruction's stream (branches run concurrently).
constexpr uint32_t kPlanFormatVersion = 5;
/// Streams a device's kernels may run on (Instruction::stream).
constexpr uint8_t kMaxStreams = 4;
/// Weights start at this alignment in the file so that they can be mapped.
constexpr uint64_t kWeightAlignment = 4096;

/// Arena: a device's scratch memory, planned per run. Weight: the plan
/// file's read-only data. State: a device's memory that lives across runs
/// and that kernels update in place (trainable parameters, optimizer
/// moments, running statistics, step counters).
enum class MemorySpace : uint8_t { Arena = 0, Weight = 1, State = 2 };

/// A typed region of a device's arena or state, or of the weights section.
struct BufferRef {
  MemorySpace space = MemorySpace::Arena;
  uint64_t offset = 0;
  TensorType type;
};

enum class OpCode : uint8_t {
  Kernel = 1,
  LoadInput = 2,
  StoreOutput = 3,
  Send = 4,
  Recv = 5,
  WaitConsumed = 6,
  AllReduce = 7,
};
const char *opCodeName(OpCode op);

struct Instruction {
  OpCode op = OpCode::Kernel;
  /// Kernel name and attributes (Kernel only).
  std::string kernel;
  AttrMap attrs;
  std::vector<BufferRef> inputs;
  std::vector<BufferRef> outputs;
  /// The ONNX node this came from, for diagnostics and traces.
  std::string location;
  /// Input or output index (LoadInput/StoreOutput), channel id, or
  /// collective group (AllReduce).
  uint32_t index = 0;
  /// Byte offset into the host-side input or output tensor.
  uint64_t hostOffset = 0;
  /// Pipeline micro-batch, or -1.
  int32_t microBatch = -1;
  /// The stream of a kernel whose branch runs beside others (below
  /// kMaxStreams; 0, the device's main stream, for everything else). A
  /// backend may run every instruction in program order on one stream; one
  /// that runs streams concurrently orders an instruction after every
  /// earlier one on another stream whose bytes it reads or writes, or that
  /// reads or writes its bytes.
  uint8_t stream = 0;
};

struct DeviceProgram {
  uint64_t arenaBytes = 0;
  /// Size of the device's state region (StateDecl::offset is within it).
  uint64_t stateBytes = 0;
  std::vector<Instruction> instructions;
};

struct TensorDecl {
  std::string name;
  TensorType type;
};

struct WeightDecl {
  std::string name;
  TensorType type;
  uint64_t offset = 0; // within the weights section
};

/// A tensor of a device's state. It is initialized when the plan is
/// loaded, from the weights section at `initOffset` or with zeros, and
/// then only kernels change it; partc-run reads and writes it by name
/// (--save-state, --load-state, --save-onnx).
struct StateDecl {
  /// The ONNX initializer it trains, or "<initializer>.<role>" for the
  /// optimizer's moments; unique per device.
  std::string name;
  TensorType type;
  uint32_t device = 0;
  /// Within the device's state region.
  uint64_t offset = 0;
  /// What it holds: "parameter", "momentum", "adam_m", "adam_v",
  /// "running_mean", "running_var", "step".
  std::string role;
  bool zeroInit = true;
  /// Within the weights section (unless zeroInit).
  uint64_t initOffset = 0;
};

/// How a channel's bytes move between GPUs. The CPU backend copies either
/// way.
enum class Transport : uint8_t {
  /// A device-to-device copy (NVLink or PCIe peer access, or staged by the
  /// driver where the GPUs cannot reach each other).
  PeerCopy = 0,
  /// A NCCL send and receive pair.
  Nccl = 1,
};

struct Channel {
  uint32_t srcDevice = 0;
  uint32_t dstDevice = 0;
  uint64_t bytes = 0;
  Transport transport = Transport::PeerCopy;
};

struct Plan {
  /// Free-form facts for humans: strategy, model name, compiler options.
  std::map<std::string, std::string> metadata;
  std::vector<TensorDecl> inputs;
  std::vector<TensorDecl> outputs;
  std::vector<WeightDecl> weights;
  std::vector<StateDecl> states;
  std::vector<Channel> channels;
  std::vector<DeviceProgram> devices;

  /// The weights section: mapped from the file, or owned when built in
  /// memory.
  const uint8_t *weightData = nullptr;
  uint64_t weightBytes = 0;
  std::shared_ptr<const void> storage;

  const uint8_t *weightPtr(const BufferRef &ref) const {
    return weightData + ref.offset;
  }
};

/// One instruction's execution interval in a traced run, in microseconds
/// from the start of the run on its device.
struct TraceEvent {
  size_t device = 0, index = 0;
  double startUs = 0, durationUs = 0;
  /// Streamed runs trace spans rather than instructions: a graph segment or
  /// a copy, named here (empty: named after instruction `index`), on track
  /// 0 (compute stream) or 1 (copy stream), for batch `batch`.
  std::string name, category;
  int track = 0;
  int64_t batch = -1;

  /// Instruction `index` of `device` in a run that is not streamed.
  static TraceEvent ofInstruction(size_t device, size_t index, double startUs,
                                  double durationUs) {
    TraceEvent e;
    e.device = device;
    e.index = index;
    e.startUs = startUs;
    e.durationUs = durationUs;
    return e;
  }
};

/// Writes a Chrome/Perfetto trace (one track per device) of `events`.
Status writeTrace(const std::string &path, const Plan &plan,
                  const std::string &backend,
                  const std::vector<TraceEvent> &events);

/// Writes a cost table (mean seconds of every kernel instruction and the
/// signature partc compile --cost-table matches on). `seconds(d, i)` is the
/// time of instruction i of device d; `variant(d, i)`, where given, names the
/// implementation the backend chose for it (null when it had no choice).
Status writeProfile(
    const std::string &path, const Plan &plan, const std::string &backend,
    const std::function<double(size_t, size_t)> &seconds,
    const std::function<const char *(size_t, size_t)> &variant = nullptr);

/// "device D instruction I (kernel conv, ONNX node 'x')", for diagnostics.
std::string describeInstruction(size_t device, size_t index,
                                const Instruction &instruction);

/// The operand and result types of an instruction.
void instructionTypes(const Instruction &instruction,
                      std::vector<TensorType> &inputs,
                      std::vector<TensorType> &outputs);

/// Among the statuses of devices that ran together, the first failure that
/// is not just another device giving up because of it.
Status rootCause(const std::vector<Status> &results);

/// Whether instruction kind `op` exchanges with another device (an
/// all_reduce, either end of a channel, a wait_consumed): where backends
/// record how far each device got, for reports of a stalled run.
bool exchangesWithPeer(OpCode op);

/// The first instruction of `program` at which it waits for another device
/// (its size if none): where an injected fault strikes (FaultInjection).
size_t firstPeerWait(const DeviceProgram &program);

/// Why a run stalled: `reached[d]` is the last instruction exchanging with
/// a peer that device d got to (-1: none yet; the program's size: its
/// end), `pending[d]` whether it has not finished. Names the devices others
/// wait for (a peer stopped at an instruction whose counterpart they have
/// not reached), then where each unfinished device got to; `name(d)` says
/// "device d" as the backend wants it said.
std::string stallReport(const Plan &plan, const std::vector<int64_t> &reached,
                        const std::vector<bool> &pending,
                        const std::function<std::string(size_t)> &name);

/// "step N" for a training plan (its runs are steps, as partc-run counts
/// them), else "run N".
std::string runName(const Plan &plan, size_t run);

/// "step N did not finish within S s (--step-timeout)".
std::string timeoutHeadline(const Plan &plan, size_t run, double seconds);

/// Where a streamed transfer's value lives in the arena: the instructions
/// [first, last] of `program` during which the arena range of the value
/// that its send at `anchor` reads (or its receive at `anchor` writes)
/// holds that value and nothing else. For a send, `first` is the kernel
/// that produces exactly that value; `last` is the last instruction that
/// reads it before the range is written again. False where the plan uses
/// the range less simply (a value written in place, partly overlapping
/// operands, a reader that is not a kernel, output store or send, a value
/// that is not a kernel's whole output): a backend then copies instead of
/// redirecting the range to a buffer of its own.
bool findTransferWindow(const DeviceProgram &program, size_t anchor,
                        size_t &first, size_t &last);

/// An instruction of another stream that one must wait for.
struct StreamWait {
  uint8_t stream;
  uint32_t instruction;
};

/// How a backend that runs a program's streams concurrently (Instruction::
/// stream) orders them, replaying the program in order: an instruction on
/// stream s waits for the latest earlier instruction of every other stream
/// that writes bytes (arena or state) it reads or writes, or reads bytes
/// it writes, unless s already follows that one. An instruction for which
/// `joinsAll(i)` holds runs on stream 0 after every stream's work so far
/// (the backend joins them: transfers, host kernels); a stream first used
/// after such a join starts after stream 0's work so far. Returns the
/// waits of every instruction; `streamOf(i)` is the stream i runs on.
std::vector<std::vector<StreamWait>>
streamWaits(const DeviceProgram &program,
            const std::function<bool(size_t)> &joinsAll,
            const std::function<uint8_t(size_t)> &streamOf);

/// Checks everything a backend relies on: bounds of every buffer, channel
/// pairing, full coverage of outputs and that the schedule cannot deadlock.
Status verifyPlan(const Plan &plan);

/// Reads and verifies a plan file, mapping its weights.
Status readPlanFile(const std::string &path, Plan &plan);
/// The same for a plan file's bytes at `base` (aligned to kWeightAlignment,
/// kept alive by `storage`); `path` names it in messages.
Status parsePlan(const uint8_t *base, size_t size,
                 std::shared_ptr<const void> storage, const std::string &path,
                 Plan &plan);

/// Writes `plan`. The weights come from `plan.weightData` (weightBytes long).
Status writePlanFile(const std::string &path, const Plan &plan);

/// A one-screen summary: devices, instruction and transfer counts, memory.
std::string summarizePlan(const Plan &plan);

/// Checksum used by the format (64-bit, word at a time).
uint64_t planChecksum(const uint8_t *data, size_t size, uint64_t seed);

} // namespace partc::runtime

#endif // PARTC_RUNTIME_PLAN_PLAN_H
