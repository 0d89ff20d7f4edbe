//===- ScheduleUpdates.cpp - partc-schedule-updates -----------------------===//
//
// Moves each optimizer update up to the first point where it may run, so
// that a gradient is freed once applied instead of at the end of the step
// (what PyTorch users get by stepping the optimizer in backward hooks).
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::partc {
#define GEN_PASS_DEF_SCHEDULEUPDATES
#include "compiler/Passes.h.inc"

namespace {

class ScheduleUpdatesPass
    : public impl::ScheduleUpdatesBase<ScheduleUpdatesPass> {
public:
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal() && failed(schedule(func.getBody().front())))
        return signalPassFailure();
  }

private:
  LogicalResult schedule(Block &body) {
    DenseMap<Operation *, size_t> position;
    for (auto [i, op] : llvm::enumerate(body))
      position[&op] = i;
    // The op each update follows, taken before any moves.
    SmallVector<std::pair<Operation *, Operation *>> moves;
    for (Operation &op : body) {
      if (!isa<graph::SgdUpdateOp, graph::AdamWUpdateOp>(op))
        continue;
      Operation *after = nullptr;
      auto later = [&](Operation *candidate) {
        if (candidate && candidate != &op && candidate->getBlock() == &body &&
            (!after || position.lookup(candidate) > position.lookup(after)))
          after = candidate;
      };
      for (Value operand : op.getOperands())
        later(operand.getDefiningOp());
      auto update = cast<graph::StateUpdateOpInterface>(op);
      for (unsigned i : update.getUpdatedOperands()) {
        // Readers of the variable, and of views of it.
        SmallVector<Value> views{op.getOperand(i)};
        while (!views.empty())
          for (Operation *user : views.pop_back_val().getUsers()) {
            if (user != &op && user->getBlock() == &body &&
                position.lookup(user) > position.lookup(&op)) {
              InFlightDiagnostic diag =
                  op.emitOpError()
                  << "writes operand " << i << " before '" << user->getName()
                  << "' reads it in the same step; "
                  << "hint: an update follows every reader of what it "
                     "writes (partc-apply-optimizer puts updates last)";
              diag.attachNote(user->getLoc()) << "read here";
              return failure();
            }
            later(user);
            if (isa<graph::ReshapeOp, graph::IdentityOp>(user))
              views.push_back(user->getResult(0));
          }
      }
      if (after && position.lookup(after) < position.lookup(&op))
        moves.push_back({&op, after});
    }
    for (auto [update, after] : moves)
      update->moveAfter(after);
    return success();
  }
};

} // namespace
} // namespace mlir::partc
