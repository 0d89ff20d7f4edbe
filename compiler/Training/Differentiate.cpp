//===- Differentiate.cpp - partc-differentiate ----------------------------===//
//
// Reverse-mode differentiation of @main: a loss on one output, then each
// op's GradientOpInterface in reverse order, only where a value lies on a
// path from a trainable parameter to the loss.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/Utils/PassUtils.h"

#include "dialects/Graph/GraphOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::partc {
#define GEN_PASS_DEF_DIFFERENTIATE
#include "compiler/Passes.h.inc"

namespace {

bool isFloatTensor(Value v) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && isa<FloatType>(t.getElementType());
}

/// Puts every op built while differentiating an op on that op's device:
/// a training pipeline's stages are cut on the forward graph, and each
/// backward op runs where its forward op does.
struct PlaceLikeForward : OpBuilder::Listener {
  std::optional<int64_t> device;
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    if (device && !isa<graph::ConstantOp, func::ReturnOp>(op))
      graph::setDevice(op, *device);
  }
};

class Differentiator {
public:
  Differentiator(ModuleOp module, func::FuncOp func, StringRef loss,
                 StringRef output, ArrayRef<std::string> frozen)
      : module_(module), func_(func), builder_(module.getContext()),
        lossKind_(loss), outputName_(output), frozen_(frozen) {
    builder_.setListener(&placeLikeForward_);
  }

  LogicalResult run();

private:
  FailureOr<unsigned> chooseOutput();
  LogicalResult collectParameters();
  FailureOr<Type> labelsType(Value output);
  FailureOr<Value> buildLoss(Value output, Value labels);
  void findActiveValues(Value loss);
  LogicalResult buildBackward(Value loss, ArrayRef<Operation *> forward);
  void accumulate(Value v, Value grad);

  ModuleOp module_;
  func::FuncOp func_;
  OpBuilder builder_;
  PlaceLikeForward placeLikeForward_;
  StringRef lossKind_, outputName_;
  ArrayRef<std::string> frozen_;
  /// Trainable parameters, in graph order.
  SmallVector<graph::ConstantOp> params_;
  /// Values on a path from a parameter to the loss: they get gradients.
  llvm::DenseSet<Value> active_;
  DenseMap<Value, Value> grads_;
};

FailureOr<unsigned> Differentiator::chooseOutput() {
  auto ret = cast<func::ReturnOp>(func_.getBody().front().getTerminator());
  std::string names;
  for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
    auto name = func_.getResultAttrOfType<StringAttr>(
        i, graph::GraphDialect::kNameAttrName);
    std::string n = name ? name.str() : "output" + std::to_string(i);
    if (!outputName_.empty() && n == outputName_)
      return i;
    names += (names.empty() ? "'" : ", '") + n + "'";
  }
  if (outputName_.empty() && ret.getNumOperands() == 1)
    return 0u;
  if (outputName_.empty())
    return func_.emitError() << "the model has " << ret.getNumOperands()
                             << " outputs (" << names
                             << "); choose the one the loss applies to "
                                "with --output",
           failure();
  return func_.emitError() << "--output '" << outputName_
                           << "' is not an output of the model; its outputs "
                              "are "
                           << names,
         failure();
}

LogicalResult Differentiator::collectParameters() {
  llvm::StringSet<> initializers, frozen;
  for (const std::string &name : frozen_)
    frozen.insert(name);
  for (auto constant : func_.getBody().front().getOps<graph::ConstantOp>()) {
    auto name = constant->getAttrOfType<StringAttr>(
        graph::GraphDialect::kInitializerAttrName);
    if (!name)
      continue;
    initializers.insert(name.getValue());
    if (isFloatTensor(constant) && !frozen.contains(name.getValue()))
      params_.push_back(constant);
  }
  for (const std::string &name : frozen_)
    if (!initializers.contains(name))
      return func_.emitError() << "--frozen names '" << name
                               << "', which is not an initializer of the "
                                  "model",
             failure();
  return success();
}

FailureOr<Type> Differentiator::labelsType(Value output) {
  auto type = cast<RankedTensorType>(output.getType());
  if (!isa<FloatType>(type.getElementType()))
    return func_.emitError() << "the loss applies to an output of type " << type
                             << "; it must be floating-point",
           failure();
  if (lossKind_ == "cross-entropy") {
    if (type.getRank() < 1)
      return func_.emitError() << "cross-entropy needs logits with a class "
                                  "dimension, but the output is a scalar",
             failure();
    return Type(RankedTensorType::get(type.getShape().drop_back(),
                                      builder_.getI64Type()));
  }
  return Type(type);
}

/// The mean of `x` over all its elements.
Value meanOfAll(OpBuilder &b, Location loc, Value x) {
  int64_t rank = cast<RankedTensorType>(x.getType()).getRank();
  SmallVector<int64_t> axes;
  for (int64_t d = 0; d < rank; ++d)
    axes.push_back(d);
  return graph::ReduceMeanOp::create(b, loc, x, axes, /*keepdims=*/0);
}

/// Whether `slice` keeps the leading entries of its input's last axis and
/// all of every other axis.
bool isLeadingColumnsSlice(graph::SliceOp slice) {
  auto input = cast<RankedTensorType>(slice.getInput().getType());
  ArrayRef<int64_t> starts = slice.getStarts(), ends = slice.getEnds(),
                    steps = slice.getSteps();
  int64_t rank = input.getRank();
  if (rank < 1 || static_cast<int64_t>(starts.size()) != rank)
    return false;
  for (int64_t d = 0; d < rank; ++d)
    if (starts[d] != 0 || steps[d] != 1 ||
        (d + 1 < rank && ends[d] != input.getDimSize(d)))
      return false;
  return ends.back() >= 1 && ends.back() <= input.getShape().back();
}

FailureOr<Value> Differentiator::buildLoss(Value output, Value labels) {
  Location loc = NameLoc::get(builder_.getStringAttr("loss"), func_.getLoc());
  OpBuilder &b = builder_;
  if (lossKind_ == "cross-entropy") {
    // Logits sliced from a product of padded columns are read in place:
    // neither the slice nor its gradient's pad is ever written.
    if (auto slice = output.getDefiningOp<graph::SliceOp>();
        slice && isLeadingColumnsSlice(slice))
      return Value(graph::SoftmaxCrossEntropyOp::create(
          b, loc, slice.getInput(), labels,
          b.getI64IntegerAttr(
              cast<RankedTensorType>(output.getType()).getShape().back())));
    return Value(
        graph::SoftmaxCrossEntropyOp::create(b, loc, output, labels, nullptr));
  }
  if (lossKind_ == "mse") {
    Value diff = graph::SubOp::create(b, loc, output, labels);
    return meanOfAll(b, loc, graph::MulOp::create(b, loc, diff, diff));
  }
  if (lossKind_ == "l1") {
    Value diff = graph::SubOp::create(b, loc, output, labels);
    return meanOfAll(b, loc, graph::AbsOp::create(b, loc, diff));
  }
  if (lossKind_ == "bce-with-logits") {
    // max(x, 0) - x * y + log(1 + exp(-|x|)), stable for any x.
    Value relu = graph::ReluOp::create(b, loc, output);
    Value xy = graph::MulOp::create(b, loc, output, labels);
    Value negAbs =
        graph::NegOp::create(b, loc, graph::AbsOp::create(b, loc, output));
    Value softplus = graph::SoftplusOp::create(b, loc, negAbs);
    Value sum = graph::AddOp::create(
        b, loc, graph::SubOp::create(b, loc, relu, xy), softplus, StringAttr());
    return meanOfAll(b, loc, sum);
  }
  return func_.emitError() << "unknown loss '" << lossKind_
                           << "'; expected mse, cross-entropy, "
                              "bce-with-logits or l1",
         failure();
}

void Differentiator::findActiveValues(Value loss) {
  // Forward from the parameters through float values...
  llvm::DenseSet<Value> fromParams;
  for (graph::ConstantOp p : params_)
    fromParams.insert(p.getResult());
  for (Operation &op : func_.getBody().front()) {
    bool reached = llvm::any_of(
        op.getOperands(), [&](Value v) { return fromParams.contains(v); });
    if (reached)
      for (Value r : op.getResults())
        if (isFloatTensor(r))
          fromParams.insert(r);
  }
  // ...and back from the loss.
  SmallVector<Value> work{loss};
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!fromParams.contains(v) || !active_.insert(v).second)
      continue;
    if (Operation *def = v.getDefiningOp())
      for (Value operand : def->getOperands())
        work.push_back(operand);
  }
}

void Differentiator::accumulate(Value v, Value grad) {
  auto [it, inserted] = grads_.try_emplace(v, grad);
  if (!inserted)
    it->second = graph::AddOp::create(builder_, grad.getLoc(), it->second, grad,
                                      StringAttr());
}

LogicalResult Differentiator::buildBackward(Value loss,
                                            ArrayRef<Operation *> forward) {
  auto lossType = cast<RankedTensorType>(loss.getType());
  grads_[loss] = graph::ConstantOp::create(
      builder_, loss.getLoc(),
      DenseElementsAttr::get(
          lossType, builder_.getFloatAttr(lossType.getElementType(), 1.0)));
  for (Operation *op : llvm::reverse(forward)) {
    SmallVector<Value> resultGrads;
    bool anyGrad = false;
    for (Value r : op->getResults()) {
      resultGrads.push_back(grads_.lookup(r));
      anyGrad |= resultGrads.back() != nullptr;
    }
    SmallVector<bool> needed;
    for (Value v : op->getOperands())
      needed.push_back(active_.contains(v));
    if (!anyGrad || llvm::none_of(needed, [](bool b) { return b; }))
      continue;
    auto rule = dyn_cast<graph::GradientOpInterface>(op);
    if (!rule)
      return op->emitError()
             << "'" << op->getName()
             << "' has no gradient yet, so the model cannot be trained "
                "through it; hint: --frozen the parameters before it, or "
                "see docs/training.md for the ops that train";
    // Results that do not reach the loss contribute nothing.
    for (auto [r, g] : llvm::zip(op->getResults(), resultGrads))
      if (!g)
        g = graph::ConstantOp::create(
            builder_, op->getLoc(),
            DenseElementsAttr::get(
                cast<ShapedType>(r.getType()),
                builder_.getZeroAttr(
                    cast<ShapedType>(r.getType()).getElementType())));
    SmallVector<Value> operandGrads(op->getNumOperands());
    placeLikeForward_.device = graph::getDevice(op);
    if (failed(rule.buildGradient(builder_, resultGrads, needed, operandGrads)))
      return failure();
    for (auto [v, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active_.contains(v))
        accumulate(v, g);
  }
  return success();
}

LogicalResult Differentiator::run() {
  Block &body = func_.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto outputIndex = chooseOutput();
  if (failed(outputIndex) || failed(collectParameters()))
    return failure();
  Value output = ret.getOperand(*outputIndex);
  auto labels = labelsType(output);
  if (failed(labels))
    return failure();
  for (BlockArgument arg : body.getArguments())
    if (auto name = func_.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), graph::GraphDialect::kNameAttrName);
        name && name.getValue() == "labels")
      return func_.emitError() << "the model already has an input named "
                                  "'labels', the name the training plan "
                                  "gives its labels",
             failure();
  unsigned labelsIndex = func_.getNumArguments();
  if (failed(func_.insertArgument(labelsIndex, *labels, {}, func_.getLoc())))
    return failure();
  func_.setArgAttr(labelsIndex, graph::GraphDialect::kNameAttrName,
                   builder_.getStringAttr("labels"));
  // One replica's labels when the inputs are one replica's slice.
  for (unsigned i = 0; i < labelsIndex; ++i)
    if (auto parts =
            func_.getArgAttr(i, graph::GraphDialect::kBatchSliceAttrName)) {
      func_.setArgAttr(labelsIndex, graph::GraphDialect::kBatchSliceAttrName,
                       parts);
      break;
    }
  Value labelsArg = body.getArgument(labelsIndex);

  builder_.setInsertionPoint(ret);
  // The loss where the output is computed.
  if (Operation *def = output.getDefiningOp())
    placeLikeForward_.device = graph::getDevice(def);
  auto loss = buildLoss(output, labelsArg);
  if (failed(loss))
    return failure();
  // The model and the loss; the backward ops go after them.
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);

  findActiveValues(*loss);
  SmallVector<graph::ConstantOp> trained;
  for (graph::ConstantOp p : params_)
    if (active_.contains(p.getResult()))
      trained.push_back(p);
  if (trained.empty())
    return func_.emitError()
               << "the loss depends on no float initializer of the model, so "
                  "there is nothing to train (frozen: "
               << frozen_.size() << ")",
           failure();
  if (failed(buildBackward(*loss, forward)))
    return failure();

  // Return the loss and the gradients instead of the model's outputs.
  SmallVector<Value> results{*loss};
  SmallVector<std::pair<std::string, std::string>> names{{"loss", ""}};
  for (graph::ConstantOp p : trained) {
    std::string name =
        p->getAttrOfType<StringAttr>(graph::GraphDialect::kInitializerAttrName)
            .str();
    results.push_back(grads_.lookup(p.getResult()));
    names.push_back({"grad." + name, name});
  }
  auto newRet = func::ReturnOp::create(builder_, ret.getLoc(), results);
  ret.erase();
  // State updates (running statistics, the step counter) run after the
  // backward ops, which may read the state too (dropout reads the step).
  SmallVector<Operation *> updates;
  for (Operation &op : body.without_terminator())
    if (isa<graph::StateUpdateOpInterface>(op))
      updates.push_back(&op);
  for (Operation *update : updates)
    update->moveBefore(newRet);
  func_.setType(builder_.getFunctionType(func_.getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (auto [i, n] : llvm::enumerate(names)) {
    func_.setResultAttrs(i, DictionaryAttr());
    func_.setResultAttr(i, graph::GraphDialect::kNameAttrName,
                        builder_.getStringAttr(n.first));
    if (!n.second.empty())
      func_.setResultAttr(i, graph::GraphDialect::kGradientOfAttrName,
                          builder_.getStringAttr(n.second));
  }
  placeUnplacedOps(func_);
  recordPlacement(module_, "training_loss", lossKind_);
  recordPlacement(module_, "training_parameters",
                  std::to_string(trained.size()));
  return success();
}

struct DifferentiatePass : public impl::DifferentiateBase<DifferentiatePass> {
  using DifferentiateBase::DifferentiateBase;
  void runOnOperation() override {
    auto func = getMainFunction(getOperation());
    if (failed(func))
      return signalPassFailure();
    Differentiator d(getOperation(), *func, loss, output, frozen);
    if (failed(d.run()))
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::partc
