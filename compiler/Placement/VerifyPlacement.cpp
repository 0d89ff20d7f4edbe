//===- VerifyPlacement.cpp - partc-verify-placement -----------------------===//
#include "compiler/Utils/PassUtils.h"
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

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
      if (auto transfer = dyn_cast<graph::TransferOp>(op)) {
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
    if (!ok)
      signalPassFailure();
  }
};
} // namespace
} // namespace mlir::partc
