//===- TransferWindow.cpp - Lifetime of a transferred value ---------------===//
//
// A streaming backend may keep a transferred value in a buffer of its own
// (one per batch parity) instead of the arena, so that the sender's kernels
// write what the peer copy reads and the receiver's read what it wrote.
// That is only sound while the arena range holds that one value; this finds
// the instructions for which it does.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

namespace partc::runtime {

namespace {

struct Range {
  uint64_t begin, end;
  bool touches(const BufferRef &b) const {
    return b.space == MemorySpace::Arena && b.offset < end &&
           b.offset + b.type.byteSize() > begin;
  }
  bool contains(const BufferRef &b) const {
    return b.offset >= begin && b.offset + b.type.byteSize() <= end;
  }
  /// Whether any of `operands` touches the range; `inside` turns false if
  /// one of those does not lie wholly inside it.
  bool touchedBy(const std::vector<BufferRef> &operands, bool &inside) const {
    bool any = false;
    for (const BufferRef &b : operands)
      if (touches(b)) {
        any = true;
        inside = inside && contains(b);
      }
    return any;
  }
};

} // namespace

bool findTransferWindow(const DeviceProgram &program, size_t anchor,
                        size_t &first, size_t &last) {
  const std::vector<Instruction> &instrs = program.instructions;
  if (anchor >= instrs.size())
    return false;
  const Instruction &transfer = instrs[anchor];
  bool sender = transfer.op == OpCode::Send;
  if (!sender && transfer.op != OpCode::Recv)
    return false;
  const std::vector<BufferRef> &own =
      sender ? transfer.inputs : transfer.outputs;
  if (own.size() != 1 || own[0].space != MemorySpace::Arena)
    return false;
  Range range{own[0].offset, own[0].offset + own[0].type.byteSize()};
  bool inside = true;
  first = anchor;
  if (sender) {
    // The nearest earlier writer must be a kernel producing exactly the
    // sent value, not in place. (Not an input load: a backend may skip
    // those when the input stays resident.)
    size_t i = anchor;
    bool found = false;
    while (i-- > 0) {
      const Instruction &in = instrs[i];
      if (!range.touchedBy(in.outputs, inside))
        continue;
      bool clean = true;
      if (in.op != OpCode::Kernel || in.outputs.size() != 1 ||
          in.outputs[0].offset != range.begin ||
          in.outputs[0].type.byteSize() != range.end - range.begin ||
          range.touchedBy(in.inputs, clean))
        return false;
      first = i;
      found = true;
      break;
    }
    if (!found || !inside)
      return false;
  }
  last = anchor;
  for (size_t i = anchor + 1; i < instrs.size(); ++i) {
    const Instruction &in = instrs[i];
    bool reads = range.touchedBy(in.inputs, inside);
    bool writes = range.touchedBy(in.outputs, inside);
    if (!inside || (reads && writes))
      return false;
    if (writes)
      break; // the range holds another value from here on
    if (reads) {
      if (in.op != OpCode::Kernel && in.op != OpCode::StoreOutput &&
          in.op != OpCode::Send)
        return false;
      last = i;
    }
  }
  return true;
}

} // namespace partc::runtime
