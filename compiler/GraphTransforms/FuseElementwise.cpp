//===- FuseElementwise.cpp - partc-fuse-elementwise -----------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "runtime/kernels/FusedElementwise.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::partc {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/Passes.h.inc"

namespace {

namespace fused = ::partc::runtime::fused;

/// One step of a chain: its name and its parameters.
struct ChainStep {
  StringRef name;
  SmallVector<double, 2> params;
};

/// The fused steps an op becomes (an add with a ReLU is two), or none if it
/// cannot join a chain: any f32 op that the runtime runs as one step of
/// ElementwiseOps.h.
SmallVector<ChainStep, 2> stepsOf(Operation *op) {
  if (!graph::isElementwise(op) || op->getNumResults() != 1)
    return {};
  auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!type || !type.getElementType().isF32() ||
      type.getRank() > fused::kMaxRank ||
      !llvm::all_of(op->getOperandTypes(), [](Type t) {
        return cast<ShapedType>(t).getElementType().isF32();
      }))
    return {};
  fused::Step step;
  double params[2];
  if (!fused::stepOfKernel(kernelNameFor(op), toKernelAttrs(op), step, params)
           .ok())
    return {};
  const auto &info = ::partc::runtime::ew::info(step);
  SmallVector<ChainStep, 2> steps = {
      {info.name, SmallVector<double, 2>(params, params + info.params)}};
  if (auto activation = op->getAttrOfType<StringAttr>("activation")) {
    if (activation.getValue() != "relu")
      return {};
    steps.push_back({"relu", {}});
  }
  return steps;
}

/// Whether a value of type `from` is `to` or broadcasts to it (numpy's
/// rules). A chain reads such a producer's inputs broadcast and computes
/// its steps once per element of the result: squeeze-and-excitation's
/// sigmoid of [N, C] channel scales joins the product with the [N, H, W,
/// C] map instead of running as a kernel of its own, at the price of a
/// sigmoid per element of a memory-bound pass.
bool broadcastsTo(Type from, Type to) {
  if (from == to)
    return true;
  auto a = dyn_cast<RankedTensorType>(from);
  auto b = dyn_cast<RankedTensorType>(to);
  if (!a || !b || a.getElementType() != b.getElementType() ||
      !a.hasStaticShape() || !b.hasStaticShape() || a.getRank() > b.getRank())
    return false;
  int64_t skip = b.getRank() - a.getRank();
  for (int64_t d = 0; d < a.getRank(); ++d)
    if (a.getDimSize(d) != 1 && a.getDimSize(d) != b.getDimSize(skip + d))
      return false;
  return true;
}

struct FuseElementwisePass
    : public impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](func::FuncOp f) {
      if (!f.getBody().empty())
        blocks.push_back(&f.getBody().front());
    });
    for (Block *block : blocks)
      fuseBlock(*block);
  }

  /// Grows chains from the last op of each upwards, so that a chain ends
  /// where its value leaves it.
  void fuseBlock(Block &block) {
    DenseSet<Operation *> taken;
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    for (Operation *root : llvm::reverse(ops)) {
      if (taken.contains(root) || stepsOf(root).empty())
        continue;
      llvm::SetVector<Operation *> group = grow(root, taken);
      if (group.size() < 2)
        continue;
      for (Operation *op : group)
        taken.insert(op);
      replace(root, group);
    }
  }

  /// The ops that can run with `root`: element-wise, of root's type or
  /// one that broadcasts to it, on its device, and read only by ops of the
  /// group.
  llvm::SetVector<Operation *> grow(Operation *root,
                                    const DenseSet<Operation *> &taken) {
    llvm::SetVector<Operation *> group;
    group.insert(root);
    size_t steps = stepsOf(root).size();
    Type type = root->getResult(0).getType();
    bool grew = true;
    while (grew) {
      grew = false;
      for (size_t i = 0; i < group.size(); ++i)
        for (Value operand : group[i]->getOperands()) {
          Operation *producer = operand.getDefiningOp();
          if (!producer || group.contains(producer) ||
              taken.contains(producer) ||
              producer->getBlock() != root->getBlock() ||
              !broadcastsTo(producer->getResult(0).getType(), type) ||
              graph::getDevice(producer) != graph::getDevice(root))
            continue;
          size_t more = stepsOf(producer).size();
          if (!more || steps + more > static_cast<size_t>(fused::kMaxSteps) ||
              !llvm::all_of(producer->getUsers(), [&](Operation *user) {
                return group.contains(user);
              }))
            continue;
          group.insert(producer);
          if (inputsOf(sorted(group)).size() >
              static_cast<size_t>(fused::kMaxInputs)) {
            group.pop_back();
            continue;
          }
          steps += more;
          grew = true;
        }
    }
    return group;
  }

  static SmallVector<Operation *>
  sorted(const llvm::SetVector<Operation *> &group) {
    SmallVector<Operation *> ops(group.begin(), group.end());
    llvm::sort(
        ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    return ops;
  }

  /// Values the group reads but does not compute, in first-use order.
  static llvm::SetVector<Value> inputsOf(ArrayRef<Operation *> ops) {
    DenseSet<Operation *> members(ops.begin(), ops.end());
    llvm::SetVector<Value> inputs;
    for (Operation *op : ops)
      for (Value v : op->getOperands())
        if (!members.contains(v.getDefiningOp()))
          inputs.insert(v);
    return inputs;
  }

  void replace(Operation *root, const llvm::SetVector<Operation *> &group) {
    SmallVector<Operation *> ops = sorted(group);
    llvm::SetVector<Value> inputs = inputsOf(ops);
    SmallVector<Attribute> steps;
    SmallVector<int64_t> args;
    SmallVector<double> params;
    // The step whose result each fused op's value is.
    DenseMap<Value, int64_t> stepOf;
    MLIRContext *ctx = root->getContext();
    for (Operation *op : ops) {
      SmallVector<ChainStep, 2> chainSteps = stepsOf(op);
      for (Value v : op->getOperands())
        args.push_back(
            stepOf.count(v)
                ? -stepOf[v] - 1
                : static_cast<int64_t>(llvm::find(inputs, v) - inputs.begin()));
      for (auto [i, step] : llvm::enumerate(chainSteps)) {
        // An add's ReLU reads the add.
        if (i > 0)
          args.push_back(-static_cast<int64_t>(steps.size()));
        steps.push_back(StringAttr::get(ctx, step.name));
        params.append(step.params.begin(), step.params.end());
      }
      stepOf[op->getResult(0)] = static_cast<int64_t>(steps.size()) - 1;
    }
    // Diagnostics of the fused op name the chain's last node first.
    SmallVector<Location> locs = {root->getLoc()};
    for (Operation *op : ops)
      if (op != root)
        locs.push_back(op->getLoc());
    OpBuilder builder(root);
    auto fusedOp = graph::FusedElementwiseOp::create(
        builder, FusedLoc::get(ctx, locs), root->getResult(0).getType(),
        inputs.getArrayRef(), builder.getArrayAttr(steps),
        builder.getDenseI64ArrayAttr(args),
        params.empty() ? DenseF64ArrayAttr()
                       : builder.getDenseF64ArrayAttr(params),
        IntegerAttr());
    for (NamedAttribute a : root->getDiscardableAttrs())
      fusedOp->setAttr(a.getName(), a.getValue());
    root->getResult(0).replaceAllUsesWith(fusedOp.getResult());
    for (Operation *op : llvm::reverse(ops))
      op->erase();
  }
};
} // namespace
} // namespace mlir::partc
