//===- PadMatMulColumns.cpp - partc-pad-matmul-columns --------------------===//
//
// matmul(a, b) with b of N columns becomes slice(matmul(a, pad(b)), N) with
// the padded count a multiple of the option's; where b is transpose(w),
// w's rows are padded instead and the transpose rebuilt, so that
// partc-fold-matmul-views still reads it in place.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::partc {
#define GEN_PASS_DEF_PADMATMULCOLUMNS
#include "compiler/Passes.h.inc"

namespace {

class PadMatMulColumnsPass
    : public impl::PadMatMulColumnsBase<PadMatMulColumnsPass> {
public:
  using PadMatMulColumnsBase::PadMatMulColumnsBase;

  void runOnOperation() override {
    if (multiple < 1) {
      getOperation().emitError()
          << "multiple is " << static_cast<int64_t>(multiple)
          << "; column counts are padded to a multiple of at least 1";
      return signalPassFailure();
    }
    SmallVector<graph::MatMulOp> products;
    getOperation().walk([&](graph::MatMulOp op) {
      if (qualifies(op))
        products.push_back(op);
    });
    for (graph::MatMulOp op : products)
      pad(op);
  }

private:
  bool qualifies(graph::MatMulOp op) {
    auto rhs = cast<RankedTensorType>(op.getRhs().getType());
    auto result = cast<RankedTensorType>(op.getType());
    int64_t columns = rhs.getRank() == 2 ? rhs.getDimSize(1) : 0;
    return rhs.getElementType().isF32() && op.getEpilogue().empty() &&
           !op.getActivation() && columns >= minColumns &&
           columns % multiple != 0 && result.getRank() >= 1 &&
           result.getShape().back() == columns;
  }

  void pad(graph::MatMulOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    // Placement (a pipeline's stage) follows the product.
    auto placed = [&](Operation *created) {
      for (NamedAttribute attr : op->getDiscardableAttrs())
        created->setAttr(attr.getName(), attr.getValue());
      return created;
    };
    Value rhs = op.getRhs();
    int64_t columns = cast<RankedTensorType>(rhs.getType()).getDimSize(1);
    int64_t extra = (columns + multiple - 1) / multiple * multiple - columns;
    Value padded;
    auto transpose = rhs.getDefiningOp<graph::TransposeOp>();
    if (transpose && transpose.getPerm() == ArrayRef<int64_t>{1, 0}) {
      // w's rows are b's columns: pad them, and transpose again.
      auto rows = graph::PadOp::create(b, loc, transpose.getInput(),
                                       ArrayRef<int64_t>{0, 0, extra, 0},
                                       "constant", APFloat(0.0));
      placed(rows);
      padded = placed(graph::TransposeOp::create(b, loc, rows.getResult(),
                                                 transpose.getPermAttr()))
                   ->getResult(0);
    } else {
      padded = placed(graph::PadOp::create(b, loc, rhs,
                                           ArrayRef<int64_t>{0, 0, 0, extra},
                                           "constant", APFloat(0.0)))
                   ->getResult(0);
    }
    auto wide = graph::MatMulOp::create(b, loc, op.getLhs(), padded,
                                        ValueRange{}, nullptr);
    placed(wide);
    auto type = cast<RankedTensorType>(op.getType());
    SmallVector<int64_t> starts(type.getRank(), 0),
        ends(type.getShape().begin(), type.getShape().end()),
        steps(type.getRank(), 1);
    auto kept =
        graph::SliceOp::create(b, loc, wide.getResult(), starts, ends, steps);
    placed(kept);
    op.getResult().replaceAllUsesWith(kept.getResult());
    op.erase();
    if (transpose && transpose->use_empty())
      transpose.erase();
  }
};

} // namespace
} // namespace mlir::partc
