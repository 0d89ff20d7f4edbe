//===- InsertTransfers.cpp - partc-insert-transfers -----------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include <map>

namespace mlir::partc {
#define GEN_PASS_DEF_INSERTTRANSFERS
#include "compiler/Passes.h.inc"

namespace {
struct InsertTransfersPass
    : public impl::InsertTransfersBase<InsertTransfersPass> {
  using InsertTransfersBase::InsertTransfersBase;
  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    OpBuilder builder(&getContext());
    // One transfer per (value, destination device).
    DenseMap<std::pair<Value, int64_t>, Value> moved;
    SmallVector<Operation *> ops;
    for (Operation &op : func->getBody().front())
      ops.push_back(&op);
    for (Operation *op : ops) {
      std::optional<int64_t> device = graph::getDevice(op);
      if (!device || *device == graph::kHostDevice ||
          isa<graph::TransferOp>(op))
        continue;
      for (OpOperand &use : op->getOpOperands()) {
        Value v = use.get();
        if (isHostValue(v))
          continue;
        std::optional<int64_t> from = graph::getDevice(v.getDefiningOp());
        if (!from || *from == *device)
          continue;
        Value &transfer = moved[{v, *device}];
        if (!transfer) {
          // The ops are visited in order: this is the first reader there.
          if (atFirstUse)
            builder.setInsertionPoint(op);
          else
            builder.setInsertionPointAfter(v.getDefiningOp());
          auto t = graph::TransferOp::create(
              builder, v.getDefiningOp()->getLoc(), v.getType(), v,
              builder.getI64IntegerAttr(*from),
              builder.getI64IntegerAttr(*device));
          graph::setDevice(t, *device);
          if (atFirstUse)
            t->setAttr(graph::GraphDialect::kReceiveAtUseAttrName,
                       builder.getUnitAttr());
          if (auto mb = v.getDefiningOp()->getAttr(
                  graph::GraphDialect::kMicroBatchAttrName))
            t->setAttr(graph::GraphDialect::kMicroBatchAttrName, mb);
          transfer = t.getResult();
        }
        use.set(transfer);
      }
    }
  }
};
} // namespace
} // namespace mlir::partc
