//===- RecomputeActivations.cpp - partc-recompute-activations -------------===//
//
// Most of a training step's memory is the activations the forward pass
// keeps for the backward pass. Computing some of them again right before
// the backward pass reads them (Chen et al., "Training Deep Nets with
// Sublinear Memory Cost", 2016) trades a little compute for that memory.
// The values recomputed here come from values kept anyway, so that every
// choice frees its bytes without keeping anything new; cheap ones (a
// batch norm's or an activation's output from its kept input) go first.
//
//===----------------------------------------------------------------------===//
#include "compiler/CostModel/OpCost.h"
#include "compiler/CostModel/Topology.h"
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphDialect.h"
#include "dialects/Graph/GraphOps.h"
#include "dialects/Graph/RuntimeBridge.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/DenseSet.h"

namespace mlir::partc {
#define GEN_PASS_DEF_RECOMPUTEACTIVATIONS
#include "compiler/Passes.h.inc"

namespace {

namespace cm = ::partc::costmodel;

/// The longest chain of ops one value is computed again through: longer
/// chains keep fewer bytes alive than they cost.
constexpr size_t kMostChainOps = 4;

/// A result that is less than this fraction of its op's largest is not
/// worth the op.
constexpr int64_t kLeastShareOfOp = 64;

struct Candidate {
  Value value;
  /// The ops to clone, in block order; the last produces `value`.
  SmallVector<Operation *> chain;
  /// Kept values the chain reads: they must stay kept.
  SmallVector<Value> keptLeaves;
  double seconds = 0;
  int64_t bytes = 0;
};

int64_t bytesOf(Value v) {
  auto shaped = dyn_cast<ShapedType>(v.getType());
  if (!shaped || !shaped.hasStaticShape())
    return 0;
  return static_cast<int64_t>(toTensorType(shaped).byteSize());
}

class Recomputer {
public:
  Recomputer(func::FuncOp func, const cm::DeviceSpec &device)
      : func_(func), device_(device) {}

  /// Finds the kept values; false when the function is no training step.
  bool analyze();
  /// Chooses values until `target` bytes are saved (all with `target` < 0).
  void choose(double target);
  void materialize();

  int64_t savedBytes() const { return savedBytes_; }
  double addedSeconds() const { return addedSeconds_; }
  size_t recomputedCount() const { return chosen_.size(); }

private:
  std::optional<Candidate> candidateFor(Value v) const;
  bool addToChain(Value v, Candidate &c, llvm::DenseSet<Operation *> &seen,
                  int depth) const;
  bool isBackwardUser(Operation *user) const {
    return !forward_.contains(user) && position_.lookup(user) > lossAt_;
  }

  func::FuncOp func_;
  cm::DeviceSpec device_;
  llvm::DenseSet<Operation *> forward_;
  DenseMap<Operation *, size_t> position_;
  size_t lossAt_ = 0;
  /// Forward values some op after the loss reads, in block order.
  SmallVector<Value> kept_;
  llvm::DenseSet<Value> keptSet_;
  llvm::DenseSet<Value> recomputed_, pinned_;
  SmallVector<Candidate> chosen_;
  int64_t savedBytes_ = 0;
  double addedSeconds_ = 0;
};

bool Recomputer::analyze() {
  Block &body = func_.getBody().front();
  auto ret = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!ret || ret.getNumOperands() == 0)
    return false;
  Operation *loss = ret.getOperand(0).getDefiningOp();
  if (!loss)
    return false;
  for (auto [i, op] : llvm::enumerate(body))
    position_[&op] = i;
  lossAt_ = position_.lookup(loss);
  // The forward ops, as partc-replicate-training counts them.
  collectForwardOps(ret.getOperand(0), forward_);
  for (Operation &op : body) {
    if (!forward_.contains(&op))
      continue;
    for (Value v : op.getResults()) {
      bool readAfterLoss = false, pinnedForward = false;
      for (Operation *user : v.getUsers()) {
        if (forward_.contains(user))
          continue;
        if (isa<func::ReturnOp>(user) || !isBackwardUser(user))
          pinnedForward = true;
        else
          readAfterLoss = true;
      }
      if (!readAfterLoss)
        continue;
      kept_.push_back(v);
      keptSet_.insert(v);
      // Returned or read before the loss by an op the loss does not need:
      // it lives on whatever this pass does.
      if (pinnedForward)
        pinned_.insert(v);
    }
  }
  return !kept_.empty();
}

/// Adds what computes `v` to `c`: a leaf when `v` is kept anyway or is
/// no forward op's (an argument, a constant, a variable), else its
/// producer after the producers of its operands. False when `v` cannot be
/// computed again.
bool Recomputer::addToChain(Value v, Candidate &c,
                            llvm::DenseSet<Operation *> &seen,
                            int depth) const {
  Operation *def = v.getDefiningOp();
  if (!def || !forward_.contains(def))
    return true;
  bool root = depth == 0;
  if (!root && keptSet_.contains(v)) {
    // Computing it again too would keep its own sources instead.
    if (recomputed_.contains(v))
      return false;
    c.keptLeaves.push_back(v);
    return true;
  }
  if (seen.contains(def))
    return true;
  if (!isPure(def) || def->getNumRegions() != 0 ||
      !isa<graph::GraphDialect>(def->getDialect()))
    return false;
  // Deeper than the longest chain: give up before walking further (a
  // long run of values nobody keeps would otherwise recurse through it).
  if (depth >= int(kMostChainOps))
    return false;
  for (Value operand : def->getOperands())
    if (!addToChain(operand, c, seen, depth + 1))
      return false;
  if (!seen.insert(def).second)
    return true;
  c.chain.push_back(def);
  return c.chain.size() <= kMostChainOps;
}

std::optional<Candidate> Recomputer::candidateFor(Value v) const {
  if (pinned_.contains(v) || recomputed_.contains(v))
    return std::nullopt;
  Candidate c;
  c.value = v;
  c.bytes = bytesOf(v);
  llvm::DenseSet<Operation *> seen;
  if (c.bytes == 0 || !addToChain(v, c, seen, /*depth=*/0))
    return std::nullopt;
  // A small result of a large op (a batch norm's statistics) costs the
  // whole op for few bytes.
  for (Value sibling : c.chain.back()->getResults())
    if (c.bytes * kLeastShareOfOp < bytesOf(sibling))
      return std::nullopt;
  // A view of a kept value holds none of its own bytes; a kept value with
  // a kept view keeps its bytes through the view.
  cm::OpWork rootWork = cm::analyzeOp(c.chain.back(), /*batched=*/true);
  if (rootWork.cls == cm::OpClass::View && c.chain.size() == 1)
    return std::nullopt;
  for (Operation *user : v.getUsers())
    if (forward_.contains(user) &&
        cm::analyzeOp(user, true).cls == cm::OpClass::View &&
        llvm::any_of(user->getResults(),
                     [&](Value r) { return keptSet_.contains(r); }))
      return std::nullopt;
  llvm::sort(c.chain, [&](Operation *a, Operation *b) {
    return position_.lookup(a) < position_.lookup(b);
  });
  for (Operation *op : c.chain)
    c.seconds += cm::predictSeconds(cm::analyzeOp(op, /*batched=*/true), 1.0,
                                    device_, /*tf32=*/true, nullptr);
  return c;
}

void Recomputer::choose(double target) {
  SmallVector<Candidate> ranked;
  for (Value v : kept_)
    if (auto c = candidateFor(v))
      ranked.push_back(std::move(*c));
  // Cheapest per byte first; ties in block order.
  llvm::stable_sort(ranked, [](const Candidate &a, const Candidate &b) {
    return a.seconds * double(b.bytes) < b.seconds * double(a.bytes);
  });
  for (const Candidate &ranked : ranked) {
    if (target >= 0 && double(savedBytes_) >= target)
      break;
    // Earlier choices may have pinned it or taken a value it reads.
    std::optional<Candidate> c = candidateFor(ranked.value);
    if (!c)
      continue;
    recomputed_.insert(c->value);
    for (Value leaf : c->keptLeaves)
      pinned_.insert(leaf);
    savedBytes_ += c->bytes;
    addedSeconds_ += c->seconds;
    chosen_.push_back(std::move(*c));
  }
}

void Recomputer::materialize() {
  OpBuilder builder(func_.getContext());
  for (const Candidate &c : chosen_) {
    SmallVector<Operation *> readers;
    for (Operation *user : c.value.getUsers())
      if (isBackwardUser(user))
        readers.push_back(user);
    if (readers.empty())
      continue;
    Operation *first =
        *llvm::min_element(readers, [&](Operation *a, Operation *b) {
          return position_.lookup(a) < position_.lookup(b);
        });
    builder.setInsertionPoint(first);
    IRMapping copies;
    for (Operation *op : c.chain)
      builder.clone(*op, copies);
    Value copy = copies.lookup(c.value);
    for (Operation *reader : readers)
      reader->replaceUsesOfWith(c.value, copy);
  }
}

class RecomputeActivationsPass
    : public impl::RecomputeActivationsBase<RecomputeActivationsPass> {
public:
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (targetBytes < 0) {
      module.emitError() << "partc-recompute-activations: target-bytes must "
                            "not be negative (got "
                         << static_cast<int64_t>(targetBytes)
                         << "); hint: 0 recomputes nothing, all=true "
                            "everything that can be";
      return signalPassFailure();
    }
    auto topo = cm::Topology::fromShorthand(devices);
    if (!topo) {
      module.emitError() << "partc-recompute-activations: "
                         << llvm::toString(topo.takeError());
      return signalPassFailure();
    }
    if (!all && targetBytes == 0)
      return;
    auto func = module.lookupSymbol<func::FuncOp>("main");
    if (!func || func.isExternal())
      return;
    Recomputer recomputer(func, topo->weakest());
    if (!recomputer.analyze())
      return;
    recomputer.choose(all ? -1.0 : double(targetBytes));
    recomputer.materialize();
    Builder b(module.getContext());
    module->setAttr(
        "partc.recomputed",
        b.getDictionaryAttr(
            {b.getNamedAttr("values", b.getI64IntegerAttr(static_cast<int64_t>(
                                          recomputer.recomputedCount()))),
             b.getNamedAttr("bytes",
                            b.getI64IntegerAttr(recomputer.savedBytes())),
             b.getNamedAttr("seconds",
                            b.getF64FloatAttr(recomputer.addedSeconds()))}));
  }
};

} // namespace
} // namespace mlir::partc
