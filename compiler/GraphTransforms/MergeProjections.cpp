//===- MergeProjections.cpp - partc-merge-projections ---------------------===//
//
// BERT, ViT and T5 export attention's query, key and value projections as
// three products of the same input. After partc-fold-matmul-views each is
// read only through strided views (the heads), so the three can be one
// product with the weights side by side, whose result the views read at a
// column offset: GPT-2's fused projection. One GEMM three times as wide
// fills the GPU where a small batch leaves a third of it idle, and costs
// two launches less.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "runtime/kernels/StridedMatMul.h"
#include "llvm/ADT/MapVector.h"

#include <cstring>

namespace mlir::partc {
#define GEN_PASS_DEF_MERGEPROJECTIONS
#include "compiler/Passes.h.inc"

namespace {

namespace strided = ::partc::runtime::strided;

/// The view of a [rows..., n] tensor read at column `columnOffset` of a
/// [rows..., total] one instead, or none where the view crosses a row (its
/// columns must stay within one row of n).
std::optional<strided::View> remapView(const strided::View &view, int64_t n,
                                       int64_t total, int64_t columnOffset) {
  strided::View moved = view;
  int64_t column = view.offset % n, lastColumn = column;
  for (size_t d = 0; d < view.shape.size(); ++d) {
    int64_t stride = view.strides[d];
    if (stride % n == 0) {
      moved.strides[d] = stride / n * total;
      continue;
    }
    if (view.shape[d] == 1)
      continue;
    if (stride < 0)
      return std::nullopt;
    lastColumn += (view.shape[d] - 1) * stride;
  }
  if (lastColumn >= n)
    return std::nullopt;
  moved.offset = view.offset / n * total + columnOffset + column;
  return moved;
}

strided::View operandView(graph::StridedMatMulOp op, unsigned operand) {
  if (operand == 0)
    return {{op.getLhsShape().begin(), op.getLhsShape().end()},
            {op.getLhsStrides().begin(), op.getLhsStrides().end()},
            static_cast<int64_t>(op.getLhsOffset())};
  return {{op.getRhsShape().begin(), op.getRhsShape().end()},
          {op.getRhsStrides().begin(), op.getRhsStrides().end()},
          static_cast<int64_t>(op.getRhsOffset())};
}

ElementsAttr constantValue(Value v) {
  auto constant = v.getDefiningOp<graph::ConstantOp>();
  return constant ? dyn_cast<ElementsAttr>(constant.getValue())
                  : ElementsAttr();
}

struct MergeProjectionsPass
    : public impl::MergeProjectionsBase<MergeProjectionsPass> {
  void runOnOperation() override {
    // Products of one input, grouped further by what must match: the
    // weights' rows and type, whether a bias follows, placement.
    llvm::MapVector<std::pair<Value, Attribute>, SmallVector<graph::MatMulOp>>
        groups;
    getOperation().walk([&](graph::MatMulOp op) {
      if (!mergeable(op))
        return;
      auto weight = cast<RankedTensorType>(op.getRhs().getType());
      SmallVector<Attribute> key = {
          TypeAttr::get(weight.getElementType()),
          IntegerAttr::get(IndexType::get(op.getContext()),
                           weight.getDimSize(0)),
          BoolAttr::get(op.getContext(), op.getBias() != nullptr),
          DictionaryAttr::get(op.getContext(),
                              llvm::to_vector(op->getDiscardableAttrs()))};
      groups[{op.getLhs(), ArrayAttr::get(op.getContext(), key)}].push_back(op);
    });
    for (auto &[key, products] : groups)
      if (products.size() > 1)
        merge(products);
  }

  /// A product of an input and a constant [K, N] weight, with at most a
  /// constant bias, read only by strided products through views that stay
  /// within its rows.
  static bool mergeable(graph::MatMulOp op) {
    if (op.getActivation() || op.getEpilogue().size() > 1)
      return false;
    ElementsAttr weight = constantValue(op.getRhs());
    auto weightType = cast<RankedTensorType>(op.getRhs().getType());
    auto resultType = cast<RankedTensorType>(op.getType());
    if (!weight || weightType.getRank() != 2 || resultType.getRank() < 2 ||
        !isa<FloatType>(weightType.getElementType()) ||
        resultType.getShape().back() != weightType.getDimSize(1))
      return false;
    if (Value bias = op.getBias()) {
      auto biasType = cast<RankedTensorType>(bias.getType());
      if (!constantValue(bias) || biasType.getRank() != 1 ||
          biasType.getElementType() != weightType.getElementType())
        return false;
    }
    int64_t n = weightType.getDimSize(1);
    if (op->use_empty())
      return false;
    for (OpOperand &use : op->getUses()) {
      auto reader = dyn_cast<graph::StridedMatMulOp>(use.getOwner());
      if (!reader || use.getOperandNumber() > 1 ||
          !remapView(operandView(reader, use.getOperandNumber()), n, n, 0))
        return false;
    }
    return true;
  }

  static void merge(MutableArrayRef<graph::MatMulOp> products) {
    graph::MatMulOp first = products.front();
    auto weightType = cast<RankedTensorType>(first.getRhs().getType());
    Type element = weightType.getElementType();
    int64_t rows = weightType.getDimSize(0);
    size_t elementBytes = element.getIntOrFloatBitWidth() / 8;
    int64_t total = 0;
    SmallVector<int64_t> columns, offsets;
    for (graph::MatMulOp op : products) {
      offsets.push_back(total);
      columns.push_back(
          cast<RankedTensorType>(op.getRhs().getType()).getDimSize(1));
      total += columns.back();
    }
    // Row k of the merged weight is row k of each weight in turn.
    std::vector<uint8_t> weights(rows * total * elementBytes);
    std::vector<uint8_t> biases;
    bool hasBias = first.getBias() != nullptr;
    if (hasBias)
      biases.resize(total * elementBytes);
    bool resource = false;
    for (auto [i, op] : llvm::enumerate(products)) {
      ElementsAttr value = constantValue(op.getRhs());
      resource = resource || isa<DenseResourceElementsAttr>(value);
      std::vector<uint8_t> scratch;
      ArrayRef<uint8_t> bytes = constantBytes(value, scratch);
      size_t rowBytes = columns[i] * elementBytes;
      if (bytes.size() != rows * rowBytes)
        return; // a resource without its data: leave the products alone
      for (int64_t k = 0; k < rows; ++k)
        std::memcpy(weights.data() + (k * total + offsets[i]) * elementBytes,
                    bytes.data() + k * rowBytes, rowBytes);
      if (hasBias) {
        std::vector<uint8_t> biasScratch;
        ArrayRef<uint8_t> bias =
            constantBytes(constantValue(op.getBias()), biasScratch);
        if (bias.size() != rowBytes)
          return;
        std::memcpy(biases.data() + offsets[i] * elementBytes, bias.data(),
                    rowBytes);
      }
    }

    OpBuilder b(first);
    SmallVector<Location> locs;
    for (graph::MatMulOp op : products)
      locs.push_back(op.getLoc());
    Location loc = FusedLoc::get(first.getContext(), locs);
    auto mergedType = RankedTensorType::get({rows, total}, element);
    ElementsAttr mergedValue;
    if (resource) {
      ArrayRef<char> raw(reinterpret_cast<const char *>(weights.data()),
                         weights.size());
      mergedValue = DenseResourceElementsAttr::get(
          mergedType, "weight",
          HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, 64));
    } else {
      mergedValue = bytesToElements(mergedType, weights);
    }
    SmallVector<Value> epilogue;
    Value weight =
        graph::ConstantOp::create(b, loc, mergedType, mergedValue).getResult();
    if (hasBias) {
      auto biasType = RankedTensorType::get({total}, element);
      epilogue.push_back(
          graph::ConstantOp::create(b, loc, biasType,
                                    bytesToElements(biasType, biases))
              .getResult());
    }
    auto resultType = cast<RankedTensorType>(first.getType());
    SmallVector<int64_t> shape(resultType.getShape());
    shape.back() = total;
    auto merged = graph::MatMulOp::create(
        b, loc, RankedTensorType::get(shape, resultType.getElementType()),
        first.getLhs(), weight, epilogue, nullptr);
    for (NamedAttribute a : first->getDiscardableAttrs())
      merged->setAttr(a.getName(), a.getValue());

    // Each reader's view moves onto the merged result.
    for (auto [i, op] : llvm::enumerate(products)) {
      for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
        auto reader = cast<graph::StridedMatMulOp>(use.getOwner());
        unsigned operand = use.getOperandNumber();
        strided::View view = *remapView(operandView(reader, operand),
                                        columns[i], total, offsets[i]);
        if (operand == 0) {
          reader.setLhsStrides(view.strides);
          reader.setLhsOffset(view.offset);
        } else {
          reader.setRhsStrides(view.strides);
          reader.setRhsOffset(view.offset);
        }
        use.set(merged.getResult());
      }
      SmallVector<Value> constants = {op.getRhs()};
      if (Value bias = op.getBias())
        constants.push_back(bias);
      op.erase();
      for (Value c : constants)
        if (c.use_empty())
          c.getDefiningOp()->erase();
    }
  }
};

} // namespace
} // namespace mlir::partc
