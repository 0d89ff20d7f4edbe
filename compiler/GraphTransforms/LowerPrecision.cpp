//===- LowerPrecision.cpp - partc-lower-precision -------------------------===//
//
// Walks the function once in order. An op that runs in the low type gets
// its f32 operands in that type (a constant converted here, any other value
// through one shared cast) and its f32 results retyped; an op that does
// not gets each retyped operand back in f32 through one shared cast. The
// return is such an op, so the function's signature never changes.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "runtime/kernels/ElementwiseOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <limits>

namespace mlir::partc {
#define GEN_PASS_DEF_LOWERPRECISION
#include "compiler/Passes.h.inc"

namespace {

bool isF32Tensor(Type t) {
  auto shaped = dyn_cast<RankedTensorType>(t);
  return shaped && shaped.getElementType().isF32();
}

/// Element-wise float ops the fused-chain kernels compute on 16-bit
/// operands: every unary and binary step (ElementwiseOps.h).
bool isElementwiseStep(Operation *op) {
  static const llvm::StringSet<> names = [] {
    llvm::StringSet<> s;
    for (const auto &step : ::partc::runtime::ew::kSteps)
      s.insert(step.name);
    return s;
  }();
  return names.contains(kernelNameFor(op));
}

/// Max and average pooling channels last (partc-convert-layout's form of
/// every 2-D pooling), which the GPU pools 16-bit channel by channel.
bool isChannelsLastPool(Operation *op) {
  return isa<graph::MaxPoolOp, graph::AvgPoolOp>(op) &&
         op->hasAttr("channels_last") &&
         cast<ShapedType>(op->getOperand(0).getType()).getNumElements() <=
             std::numeric_limits<int32_t>::max();
}

/// Ops with a 16-bit kernel on every backend. Products, normalizations and
/// reductions accumulate in f32 inside the kernel (a squeeze-and-excitation
/// block's global pool would otherwise widen the whole map to f32 and
/// back); data movement (and where, which selects) copies bits.
bool hasLowPrecisionKernel(Operation *op) {
  if (!isa<graph::MatMulOp, graph::GemmOp, graph::StridedMatMulOp,
           graph::ConvOp, graph::FusedElementwiseOp, graph::ReshapeOp,
           graph::IdentityOp, graph::TransposeOp, graph::SliceOp,
           graph::ConcatOp, graph::SplitOp, graph::ExpandOp, graph::GatherOp,
           graph::WhereOp, graph::SoftmaxOp, graph::LayerNormOp,
           graph::RmsNormOp, graph::ReduceSumOp, graph::ReduceMeanOp,
           graph::ReduceMaxOp, graph::ReduceMinOp>(op) &&
      !isElementwiseStep(op) && !isChannelsLastPool(op))
    return false;
  return true;
}

class LowerPrecisionPass : public impl::LowerPrecisionBase<LowerPrecisionPass> {
public:
  using LowerPrecisionBase::LowerPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (precision == "bf16") {
      low_ = BFloat16Type::get(ctx);
    } else if (precision == "fp16") {
      low_ = Float16Type::get(ctx);
    } else {
      module.emitError() << "precision is '" << precision
                         << "'; expected bf16 or fp16";
      return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        lower(func.getBody().front());
    if (failed_)
      return signalPassFailure();
    recordPlacement(module, "precision", precision);
    recordPlacement(module, "low_precision_ops", std::to_string(lowOps_));
  }

private:
  void lower(Block &body) {
    lowered_.clear();
    widened_.clear();
    retyped_.clear();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<graph::ConstantOp>(op))
        continue;
      if (hasLowPrecisionKernel(&op) && allFloatsAreF32(&op)) {
        for (OpOperand &use : op.getOpOperands())
          if (isF32Tensor(use.get().getType()))
            use.set(lowered(use.get()));
        for (OpResult r : op.getResults())
          if (isF32Tensor(r.getType())) {
            r.setType(retyped(r.getType()));
            retyped_.insert(r);
          }
        ++lowOps_;
        continue;
      }
      for (OpOperand &use : op.getOpOperands())
        if (retyped_.contains(use.get()))
          use.set(widened(use.get()));
    }
    // Weights wholly replaced by their converted copies.
    for (Operation &op : llvm::make_early_inc_range(body))
      if (isa<graph::ConstantOp>(op) && op.use_empty())
        op.erase();
  }

  /// Every float operand and result is f32 (an operand this pass retyped
  /// counts as the f32 it was), and there is one at least.
  bool allFloatsAreF32(Operation *op) {
    bool any = false;
    for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
      Type element = cast<ShapedType>(v.getType()).getElementType();
      bool f32 = element.isF32() || retyped_.contains(v);
      if (isa<FloatType>(element) && !f32)
        return false;
      any = any || f32;
    }
    return any;
  }

  Type retyped(Type t) { return cast<RankedTensorType>(t).clone(low_); }

  /// `value` (f32) in the low type: a converted constant, or a cast placed
  /// right after its definition, shared by every reader.
  Value lowered(Value value) {
    auto [it, inserted] = lowered_.try_emplace(value, Value());
    if (!inserted)
      return it->second;
    Type type = retyped(value.getType());
    if (auto constant = value.getDefiningOp<graph::ConstantOp>()) {
      OpBuilder b(constant);
      b.setInsertionPointAfter(constant);
      ElementsAttr data = convert(constant.getValue(), cast<ShapedType>(type));
      if (!data) {
        constant.emitError()
            << "has no readable data to convert to " << precision
            << "; hint: an external weight file is missing";
        failed_ = true;
        return it->second = castAfterDefinition(value, type);
      }
      auto converted = graph::ConstantOp::create(b, constant.getLoc(), data);
      for (NamedAttribute attr : constant->getDiscardableAttrs())
        converted->setAttr(attr.getName(), attr.getValue());
      return it->second = converted.getResult();
    }
    return it->second = castAfterDefinition(value, type);
  }

  /// A retyped `value` back in f32, for an op that runs in f32.
  Value widened(Value value) {
    auto [it, inserted] = widened_.try_emplace(value, Value());
    if (!inserted)
      return it->second;
    Type f32 = cast<RankedTensorType>(value.getType())
                   .clone(Float32Type::get(&getContext()));
    return it->second = castAfterDefinition(value, f32);
  }

  Value castAfterDefinition(Value value, Type type) {
    OpBuilder b(&getContext());
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
    auto castOp = graph::CastOp::create(
        b, value.getLoc(), type, value,
        TypeAttr::get(cast<ShapedType>(type).getElementType()));
    if (Operation *def = value.getDefiningOp())
      if (Attribute device = def->getAttr(graph::GraphDialect::kDeviceAttrName))
        castOp->setAttr(graph::GraphDialect::kDeviceAttrName, device);
    return castOp.getResult();
  }

  /// The f32 elements of `value` rounded to nearest even in `type`'s
  /// element type; large weights stay resource blobs.
  ElementsAttr convert(ElementsAttr value, ShapedType type) {
    std::vector<uint8_t> scratch;
    ArrayRef<uint8_t> bytes = constantBytes(value, scratch);
    int64_t n = type.getNumElements();
    if (bytes.size() != static_cast<size_t>(n) * sizeof(float))
      return nullptr; // the caller reports it
    std::vector<uint16_t> out(n);
    const float *in = reinterpret_cast<const float *>(bytes.data());
    bool bf16 = low_.isBF16();
    for (int64_t i = 0; i < n; ++i) {
      float v;
      std::memcpy(&v, in + i, sizeof(float));
      out[i] = bf16 ? ::partc::runtime::floatToBf16(v)
                    : ::partc::runtime::floatToHalf(v);
    }
    ArrayRef<char> raw(reinterpret_cast<const char *>(out.data()),
                       out.size() * sizeof(uint16_t));
    if (isa<DenseResourceElementsAttr>(value)) {
      AsmResourceBlob blob =
          HeapAsmResourceBlob::allocateAndCopyWithAlign(raw, 64);
      return DenseResourceElementsAttr::get(type, "weight_" + precision,
                                            std::move(blob));
    }
    return bytesToElements(
        type, ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(raw.data()),
                                raw.size()));
  }

  Type low_;
  bool failed_ = false;
  DenseMap<Value, Value> lowered_, widened_;
  DenseSet<Value> retyped_;
  int64_t lowOps_ = 0;
};

} // namespace
} // namespace mlir::partc
