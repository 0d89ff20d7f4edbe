//===- VerifyPlacement.cpp - partc-verify-placement -----------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/InterleavedRange.h"

#include <algorithm>
#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_VERIFYPLACEMENT
#include "compiler/Passes.h.inc"

namespace {
struct VerifyPlacementPass
    : public impl::VerifyPlacementBase<VerifyPlacementPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto func = getMainFunction(module);
    if (failed(func))
      return signalPassFailure();
    int64_t numDevices = getNumDevices(module);
    bool ok = true;
    llvm::DenseSet<Value> updated;
    for (Operation &op : func->getBody().front()) {
      if (isa<graph::ConstantOp, func::ReturnOp>(op))
        continue;
      std::optional<int64_t> device = graph::getDevice(&op);
      if (!device) {
        op.emitError() << "has no device; run partc-assign-devices or "
                          "partc-replicate-data-parallel";
        ok = false;
        continue;
      }
      if (*device >= numDevices) {
        op.emitError() << "is placed on device " << *device
                       << " but the module has "
                       << static_cast<int64_t>(numDevices) << " device(s)";
        ok = false;
        continue;
      }
      if (*device == graph::kHostDevice) {
        // Host ops only slice inputs and gather outputs.
        bool boundary = isa<graph::SliceOp>(op)
                            ? isa<BlockArgument>(op.getOperand(0))
                            : llvm::all_of(op.getUsers(), [](Operation *u) {
                                return isa<func::ReturnOp>(u);
                              });
        if (!boundary) {
          op.emitError() << "runs on the host but does not slice a model "
                            "input or gather a model output";
          ok = false;
        }
        continue;
      }
      if (auto update = dyn_cast<graph::StateUpdateOpInterface>(op))
        for (unsigned i : update.getUpdatedOperands())
          updated.insert(op.getOperand(i));
      if (auto transfer = dyn_cast<graph::TransferOp>(op)) {
        if (updated.contains(transfer.getInput())) {
          op.emitError() << "moves state that an update before it already "
                            "changed; a transfer of state must come before "
                            "the state's update";
          ok = false;
        }
        Operation *src = transfer.getInput().getDefiningOp();
        if (!src || graph::getDevice(src) != int64_t(transfer.getSource())) {
          op.emitError() << "moves a value that is not produced on its "
                            "source device "
                         << transfer.getSource();
          ok = false;
        }
        continue;
      }
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        if (isHostValue(v))
          continue;
        std::optional<int64_t> from = graph::getDevice(v.getDefiningOp());
        if (from != device) {
          op.emitError() << "operand #" << i << " is produced on device "
                         << (from ? std::to_string(*from) : "(none)")
                         << " but used on device " << *device
                         << "; run partc-insert-transfers";
          ok = false;
        }
      }
    }
    if (!ok || failed(verifyCollectives(*func)))
      signalPassFailure();
  }

  /// Each all_reduce group has one op on each of its devices, all of the
  /// same types, and every device meets the groups it shares with another in
  /// the same order (else the devices would wait for each other forever).
  LogicalResult verifyCollectives(func::FuncOp func) {
    llvm::MapVector<int64_t, SmallVector<graph::AllReduceOp>> groups;
    std::map<int64_t, SmallVector<int64_t>> orderOnDevice;
    for (auto reduce : func.getBody().front().getOps<graph::AllReduceOp>()) {
      groups[reduce.getGroup()].push_back(reduce);
      orderOnDevice[graph::getDevice(reduce).value_or(-1)].push_back(
          reduce.getGroup());
    }
    for (auto &[group, members] : groups) {
      graph::AllReduceOp first = members.front();
      SmallVector<int64_t> onDevices;
      for (graph::AllReduceOp m : members) {
        if (m.getDevices() != first.getDevices() ||
            m.getInputs().getTypes() != first.getInputs().getTypes())
          return m.emitOpError() << "disagrees with group " << group
                                 << "'s first op on its devices or types";
        onDevices.push_back(graph::getDevice(m).value_or(-1));
      }
      ArrayRef<int64_t> listed = first.getDevices();
      if (onDevices.size() != listed.size() ||
          !std::is_permutation(onDevices.begin(), onDevices.end(),
                               listed.begin()))
        return first.emitOpError()
               << "group " << group << " has ops on devices "
               << llvm::interleaved(onDevices) << " but lists devices "
               << llvm::interleaved(first.getDevices())
               << "; each listed device needs exactly one";
    }
    for (auto &[device, order] : orderOnDevice)
      for (auto &[other, otherOrder] : orderOnDevice) {
        auto shared = [&](ArrayRef<int64_t> seq, ArrayRef<int64_t> with) {
          SmallVector<int64_t> kept;
          for (int64_t g : seq)
            if (llvm::is_contained(with, g))
              kept.push_back(g);
          return kept;
        };
        if (shared(order, otherOrder) != shared(otherOrder, order))
          return func.emitError()
                 << "devices " << device << " and " << other
                 << " meet their all_reduce groups in different orders; the "
                    "collectives would deadlock";
      }
    return success();
  }
};
} // namespace
} // namespace mlir::partc
